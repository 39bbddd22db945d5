package testenv

import (
	"bufio"
	"context"
	"fmt"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// ProcessCPU is this process's CPU time, user and system: benchmarks divide its growth
// over a loop by the loop's iterations.
func ProcessCPU(t testing.TB) time.Duration {
	t.Helper()
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		t.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// RedisCPU is the Redis server's CPU time, used_cpu_sys + used_cpu_user of INFO cpu: the
// whole server's, so anything else using it counts.
func RedisCPU(t testing.TB, rc redis.UniversalClient) time.Duration {
	t.Helper()
	info, err := rc.Info(context.Background(), "cpu").Result()
	if err != nil {
		t.Fatal(err)
	}
	d, err := parseRedisCPU(info)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// parseRedisCPU sums used_cpu_sys and used_cpu_user (seconds) of an INFO cpu reply.
func parseRedisCPU(info string) (time.Duration, error) {
	var sum float64
	found := 0
	sc := bufio.NewScanner(strings.NewReader(info))
	for sc.Scan() {
		k, v, ok := strings.Cut(strings.TrimSpace(sc.Text()), ":")
		if !ok || (k != "used_cpu_sys" && k != "used_cpu_user") {
			continue
		}
		f, err := strconv.ParseFloat(v, 64)
		if err != nil {
			return 0, fmt.Errorf("testenv: INFO cpu: %q: %w", sc.Text(), err)
		}
		sum += f
		found++
	}
	if found != 2 {
		return 0, fmt.Errorf("testenv: INFO cpu without used_cpu_sys and used_cpu_user: %q", info)
	}
	return time.Duration(sum * float64(time.Second)), nil
}

// ReportCPU runs loop, which runs b's iterations, and reports this process's and the
// Redis server's CPU per unit ("client-cpu-us/<unit>", "server-cpu-us/<unit>"), for
// iterations of per units each.
func ReportCPU(b *testing.B, rc redis.UniversalClient, unit string, per int, loop func()) {
	b.Helper()
	client, server := ProcessCPU(b), RedisCPU(b, rc)
	b.ResetTimer()
	loop()
	b.StopTimer()
	n := float64(b.N * per)
	b.ReportMetric(float64((ProcessCPU(b)-client).Nanoseconds())/1e3/n, "client-cpu-us/"+unit)
	b.ReportMetric(float64((RedisCPU(b, rc)-server).Nanoseconds())/1e3/n, "server-cpu-us/"+unit)
}
