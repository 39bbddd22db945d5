package costbench

import (
	"context"
	"math"
	"net/url"
	"os"
	"testing"
	"time"

	"github.com/prometheus/procfs"

	"github.com/junban/junban/internal/platform/config"
	"github.com/junban/junban/internal/testenv"
)

// The server's CPU counts its backends' work, a backend that has ended included (its
// time moves into the postmaster's children's time when the postmaster reaps it).
func TestPGServerCPUCountsBackendsEndedOrNot(t *testing.T) {
	ctx := context.Background()
	pgURL := testenv.PostgresURL(t)
	u, err := url.Parse(pgURL)
	if err != nil {
		t.Fatal(err)
	}
	if !loopback(u.Hostname()) {
		t.Skipf("PostgreSQL is not on this host (%s): the server's processes are not in /proc", u.Hostname())
	}
	db, err := config.Postgres{URL: pgURL}.Open()
	if err != nil {
		t.Fatal(err)
	}
	sqlDB, _ := db.DB()
	sqlDB.SetMaxOpenConns(1) // one backend: the one the work below runs on
	var pid int
	if err := db.Raw("SELECT pg_backend_pid()").Row().Scan(&pid); err != nil {
		t.Fatal(err)
	}
	work := func() {
		t.Helper()
		var n int64
		if err := db.Raw("SELECT count(*) FROM generate_series(1, 3000000)").Row().Scan(&n); err != nil || n != 3000000 {
			t.Fatalf("the work: %d, %v", n, err)
		}
	}
	read := func() float64 {
		t.Helper()
		s, ok, err := pgServerCPU(ctx, db)
		if err != nil || !ok {
			t.Fatalf("pgServerCPU: ok %v, %v (the server is on this host)", ok, err)
		}
		return s
	}

	// Each backend reading lies inside the server readings around it: the server's
	// reading runs a query on the backend before it reads /proc.
	s0 := read()
	b0 := backendCPU(t, pid)
	work()
	b1 := backendCPU(t, pid)
	s1 := read()
	if b1 <= b0 {
		t.Fatalf("the backend spent no CPU on the work (%.2f s then %.2f s)", b0, b1)
	}
	if ticks(s1-s0) < ticks(b1-b0) {
		t.Fatalf("the server spent %.2f s, less than its backend's %.2f s", s1-s0, b1-b0)
	}

	// The backend ends; what it spent still counts.
	b2 := backendCPU(t, pid)
	work()
	spent := backendCPU(t, pid) - b2
	if err := sqlDB.Close(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, err := procfs.NewProc(pid); err != nil {
			break // reaped
		}
		if time.Now().After(deadline) {
			t.Fatalf("backend %d still there 30 s after its connection closed", pid)
		}
		time.Sleep(20 * time.Millisecond)
	}
	db2, err := config.Postgres{URL: pgURL}.Open()
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if d, err := db2.DB(); err == nil {
			d.Close()
		}
	}()
	s2, ok, err := pgServerCPU(ctx, db2)
	if err != nil || !ok {
		t.Fatalf("pgServerCPU: ok %v, %v", ok, err)
	}
	if ticks(s2-s1) < ticks(spent) {
		t.Fatalf("the server spent %.2f s, less than the %.2f s of its backend that ended", s2-s1, spent)
	}
}

// backendCPU is one process's own CPU so far (seconds).
func backendCPU(t *testing.T, pid int) float64 {
	t.Helper()
	p, err := procfs.NewProc(pid)
	if err != nil {
		t.Fatal(err)
	}
	st, err := p.Stat()
	if err != nil {
		t.Fatal(err)
	}
	return st.CPUTime()
}

// ticks is seconds of CPU in /proc's unit, whole: two sums of the same ticks compare
// equal, whatever their floating-point rounding.
func ticks(s float64) int64 { return int64(math.Round(s * userHZ)) }

func loopback(host string) bool {
	return host == "localhost" || host == "127.0.0.1" || host == "::1" || host == ""
}

// A backend pid that names no PostgreSQL process here (the server is on another host, and
// the pid is some other process's on this one) is not taken for the server's.
func TestPostmasterOfAnotherProcess(t *testing.T) {
	if _, ok := postmasterOf(os.Getpid()); ok {
		t.Fatal("the test's own process was taken for a PostgreSQL backend")
	}
	if _, ok := postmasterOf(1 << 30); ok {
		t.Fatal("a pid with no process was taken for a PostgreSQL backend")
	}
}
