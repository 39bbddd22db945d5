// Package progress reports how far a long command got: a bar redrawn in place on a
// terminal, and elsewhere (CI logs, pipes, files) a plain line every few seconds, so that
// logs never fill with the bar's carriage-return frames.
package progress

import (
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"
)

// LineEvery is how often a plain (non-terminal) report prints a line.
const LineEvery = 5 * time.Second

// Bar counts done out of a known total.
type Bar interface {
	Set(done int) error
	Add(n int) error
	Finish() error
}

// New returns a Bar writing to w: a progress bar when w is a terminal, plain periodic
// lines "<what>: <done>/<total>" otherwise, nothing when w is nil.
func New(w io.Writer, total int, what string) Bar {
	if w == nil {
		w = io.Discard
	}
	if f, ok := w.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		return progressbar.NewOptions(total, progressbar.OptionSetWriter(w), progressbar.OptionSetDescription(what),
			progressbar.OptionShowCount(), progressbar.OptionShowIts(), progressbar.OptionThrottle(200*time.Millisecond),
			progressbar.OptionClearOnFinish())
	}
	return &lines{w: w, total: total, what: what, now: time.Now}
}

// lines prints done/total at most every LineEvery, and once at Finish.
type lines struct {
	mu          sync.Mutex
	w           io.Writer
	total, done int
	what        string
	last        time.Time
	finished    bool
	now         func() time.Time
}

func (l *lines) Set(done int) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.done = done
	return l.maybe()
}

func (l *lines) Add(n int) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.done += n
	return l.maybe()
}

func (l *lines) Finish() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.finished || l.w == io.Discard {
		return nil
	}
	l.finished = true
	_, err := fmt.Fprintf(l.w, "%s: %d/%d done\n", l.what, l.done, l.total)
	return err
}

func (l *lines) maybe() error {
	if l.w == io.Discard || l.finished {
		return nil
	}
	now := l.now()
	if l.last.IsZero() {
		l.last = now // the first line comes after LineEvery: short runs print only the end
		return nil
	}
	if now.Sub(l.last) < LineEvery {
		return nil
	}
	l.last = now
	_, err := fmt.Fprintf(l.w, "%s: %d/%d\n", l.what, l.done, l.total)
	return err
}
