package testenv

import (
	"testing"
	"time"
)

func TestParseRedisCPU(t *testing.T) {
	d, err := parseRedisCPU("# CPU\r\nused_cpu_sys:1.500000\r\nused_cpu_user:0.250000\r\nused_cpu_sys_children:9.000000\r\n")
	if err != nil || d != 1750*time.Millisecond {
		t.Fatalf("got %v, %v; want 1.75s", d, err)
	}
	for _, bad := range []string{"# CPU\r\nused_cpu_sys:1.5\r\n", "used_cpu_sys:x\r\nused_cpu_user:1\r\n"} {
		if _, err := parseRedisCPU(bad); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}
