// Package growstack grows a goroutine's stack at its start, in one step.
//
// A goroutine starts with a small stack (2 KB, or the average the runtime saw at the last
// GC) and doubles it each time a call needs more. Each doubling copies the stack and walks
// every frame on it to adjust its pointers, so a goroutine that calls into a deep library
// (the AWS SDK's middleware, go-redis's command path) pays several walks of a deep stack,
// once per goroutine. The goroutines junban starts per message, per turn and per batch are
// short-lived: they pay it every time. Grow, called first thing, makes the runtime size
// the stack once, while it holds a single frame (docs/performance.md, "Decisions kept").
package growstack

// keep is never true: with sink, it keeps the compiler from dropping Grow's array.
var (
	keep bool
	sink byte
)

// Grow makes the calling goroutine's stack 32 KB at least. Call it first thing in a
// goroutine whose work goes deep; a goroutine that stays shallow would only hold memory it
// does not use. The stack still shrinks at a GC when little of it is in use.
//
//go:noinline
func Grow() {
	var buf [24 << 10]byte
	if keep {
		for i := range buf {
			buf[i] = byte(i)
		}
		sink = buf[int(sink)]
	}
}
