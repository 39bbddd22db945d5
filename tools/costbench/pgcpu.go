package costbench

import (
	"context"
	"fmt"

	"github.com/prometheus/procfs"
	"gorm.io/gorm"
)

// userHZ is the unit of /proc's CPU times, as procfs reads them.
const userHZ = 100

// pgServerCPU is the PostgreSQL server's CPU so far, in seconds: its postmaster's, and
// every process the postmaster started (the backends, the WAL writer, the checkpointer,
// autovacuum). A process that ended still counts: the postmaster reaps it, and its time
// moves into the postmaster's children's time, which is counted too. So the delta of two
// readings is what the server spent between them, whatever started or ended in between.
// ok is false when the server does not run on this host: /proc has no postgres process
// as the parent of db's own backend.
func pgServerCPU(ctx context.Context, db *gorm.DB) (seconds float64, ok bool, err error) {
	var backend int
	if err := db.WithContext(ctx).Raw("SELECT pg_backend_pid()").Row().Scan(&backend); err != nil {
		return 0, false, fmt.Errorf("costbench: pg_backend_pid: %w", err)
	}
	postmaster, ok := postmasterOf(backend)
	if !ok {
		return 0, false, nil
	}
	// A child reaped while the children are read would be in neither sum, or in both: read
	// again until the postmaster's children's time stayed the same across the reading.
	for range 5 {
		children, err := childrenCPU(postmaster.PID)
		if err != nil {
			return 0, false, err
		}
		again, ok := postmasterOf(backend)
		if !ok {
			return 0, false, fmt.Errorf("costbench: PostgreSQL's postmaster %d is gone", postmaster.PID)
		}
		if again.CUTime == postmaster.CUTime && again.CSTime == postmaster.CSTime {
			own := float64(again.UTime+again.STime) + float64(again.CUTime+again.CSTime)
			return (own + children) / userHZ, true, nil
		}
		postmaster = again
	}
	return 0, false, fmt.Errorf("costbench: PostgreSQL's processes kept ending while their CPU was read")
}

// childrenCPU sums the CPU (ticks) of the live processes whose parent is pid.
func childrenCPU(pid int) (float64, error) {
	procs, err := procfs.AllProcs()
	if err != nil {
		return 0, fmt.Errorf("costbench: the processes of PostgreSQL's server: %w", err)
	}
	var ticks float64
	for _, p := range procs {
		st, err := p.Stat()
		if err != nil || st.PPID != pid {
			continue // ended meanwhile, or not the server's
		}
		ticks += float64(st.UTime + st.STime)
	}
	return ticks, nil
}

// postmasterOf returns the stat of the process that started backend, when both are
// PostgreSQL's processes on this host.
func postmasterOf(backend int) (procfs.ProcStat, bool) {
	b, err := procfs.NewProc(backend)
	if err != nil {
		return procfs.ProcStat{}, false
	}
	bs, err := b.Stat()
	if err != nil || !isPostgres(bs.Comm) {
		return procfs.ProcStat{}, false // another host's pid, here some other process
	}
	p, err := procfs.NewProc(bs.PPID)
	if err != nil {
		return procfs.ProcStat{}, false
	}
	ps, err := p.Stat()
	if err != nil || !isPostgres(ps.Comm) {
		return procfs.ProcStat{}, false
	}
	return ps, true
}

// isPostgres reports whether a process's command name is the server's: "postgres", or
// "postmaster" where the server was started by that older name.
func isPostgres(comm string) bool { return comm == "postgres" || comm == "postmaster" }
