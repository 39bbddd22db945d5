package growstack_test

import (
	"testing"
	"unsafe"

	"github.com/junban/junban/internal/platform/growstack"
)

// deep uses about 100 bytes of stack a level.
//
//go:noinline
func deep(n int) int {
	var pad [64]byte
	pad[n%64] = byte(n)
	if n == 0 {
		return int(pad[0])
	}
	return deep(n-1) + int(pad[n%64])
}

// moved reports whether a fresh goroutine's stack was copied elsewhere (grown) while it
// ran deep(200), about 20 KB: the address of a local variable changes when it is.
func moved(grow bool) bool {
	done := make(chan bool)
	go func() {
		if grow {
			growstack.Grow()
		}
		var x int
		before := uintptr(unsafe.Pointer(&x))
		deep(200)
		done <- uintptr(unsafe.Pointer(&x)) != before
	}()
	return <-done
}

// A goroutine that called Grow runs 20 KB deep without its stack being grown. Broken
// variant tried: Grow's array written but never read, which the compiler drops (a frame
// of 0 bytes): the stack grew.
func TestGrowSizesTheStackFirst(t *testing.T) {
	if !moved(false) {
		t.Fatal("a fresh goroutine ran 20 KB deep without growing its stack: the test shows nothing")
	}
	if moved(true) {
		t.Fatal("the stack was grown after Grow")
	}
}

// BenchmarkDeepGoroutine is what the per-message goroutines pay: one goroutine that goes
// 20 KB deep, with and without Grow first.
func BenchmarkDeepGoroutine(b *testing.B) {
	for _, grow := range []bool{false, true} {
		name := "plain"
		if grow {
			name = "grow"
		}
		b.Run(name, func(b *testing.B) {
			for b.Loop() {
				moved(grow)
			}
		})
	}
}
