package main

import (
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"
)

// progress draws a one-line progress bar on a terminal. It stays silent for
// the first showAfter of a run, so short runs print nothing, and a nil
// *progress (stderr is not a terminal) does nothing at all.
//
// A run is a number of cases; a case has one or more parts (the engine,
// then the naive baseline), and a part a number of timed runs. The bar
// fills by cases, parts and runs; a ticker redraws it while a long run
// gives no news, so the elapsed time keeps moving.
type progress struct {
	w     io.Writer
	begin time.Time
	quit  chan struct{} // closed by stop; never reassigned
	once  sync.Once     // guards the close of quit

	mu       sync.Mutex
	stopped  bool // stop has run; draw does nothing
	lines    bool // a line per finished case rather than a bar (w is not a terminal)
	shown    bool // the line is on the screen
	total    int  // cases in the run
	finished int  // cases finished
	parts    int  // parts of the current case
	part     int  // parts of it begun
	steps    int  // runs in the current part
	stepped  int  // runs finished in it
	label    string
}

const (
	showAfter   = 2 * time.Second
	redrawEvery = 250 * time.Millisecond
	barWidth    = 30
)

// newProgress returns a progress bar on w if w is a terminal; if w is
// another file (stderr sent to a log or a pipe), a progress that writes a
// line per finished case there instead, since a bar redrawn in place
// would fill a log with carriage returns, and no output at all for
// minutes reads as a hang; else (w is not a file) nil. The caller must
// call stop.
func newProgress(w io.Writer) *progress {
	f, ok := w.(*os.File)
	if !ok {
		return nil
	}
	fi, err := f.Stat()
	if err != nil {
		return nil
	}
	p := &progress{w: w, begin: time.Now(), quit: make(chan struct{})}
	if fi.Mode()&os.ModeCharDevice == 0 {
		p.lines = true
		return p
	}
	go p.tickle(p.quit)
	return p
}

// tickle redraws the bar every redrawEvery until quit is closed.
func (p *progress) tickle(quit <-chan struct{}) {
	t := time.NewTicker(redrawEvery)
	defer t.Stop()
	for {
		select {
		case <-quit:
			return
		case <-t.C:
			p.mu.Lock()
			p.draw()
			p.mu.Unlock()
		}
	}
}

// setTotal sets the number of cases the run will count.
func (p *progress) setTotal(n int) {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.total = n
}

// phase names what is happening outside the counted cases.
func (p *progress) phase(label string) {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.label = label
	p.draw()
}

// beginCase starts the next case, made of parts parts.
func (p *progress) beginCase(parts int) {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.parts, p.part, p.steps, p.stepped = max(1, parts), 0, 0, 0
}

// start begins the next part of the current case, which makes n runs.
func (p *progress) start(label string, n int) {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.label, p.steps, p.stepped = label, n, 0
	p.part++
	p.draw()
}

// tick records one finished run of the current part.
func (p *progress) tick() {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.stepped++
}

// done records a finished case.
func (p *progress) done() {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.finished++
	p.parts, p.part, p.steps, p.stepped = 0, 0, 0, 0
	if p.lines {
		if !p.stopped {
			fmt.Fprintf(p.w, "attnbench: %d/%d done: %s (%s)\n", p.finished, p.total, p.label, time.Since(p.begin).Truncate(time.Second))
		}
		return
	}
	p.draw()
}

// stop ends the ticker and removes the bar, so that what follows starts
// on a clean line.
func (p *progress) stop() {
	if p == nil {
		return
	}
	p.once.Do(func() {
		if p.quit != nil {
			close(p.quit)
		}
	})
	p.mu.Lock()
	defer p.mu.Unlock()
	p.stopped = true
	if p.shown {
		fmt.Fprint(p.w, "\r\x1b[K")
		p.shown = false
	}
}

// fraction is how much of the run is done, in [0, 1].
func (p *progress) fraction() float64 {
	if p.total == 0 {
		return 0
	}
	inCase := 0.0
	if p.parts > 0 && p.part > 0 {
		inPart := 0.0
		if p.steps > 0 {
			inPart = min(1, float64(p.stepped)/float64(p.steps))
		}
		inCase = min(1, (float64(p.part-1)+inPart)/float64(p.parts))
	}
	return min(1, (float64(p.finished)+inCase)/float64(p.total))
}

// draw redraws the bar; p.mu is held.
func (p *progress) draw() {
	if p.stopped || p.lines {
		return
	}
	elapsed := time.Since(p.begin)
	if elapsed < showAfter {
		return
	}
	frac := p.fraction()
	fill := int(frac * barWidth)
	bar := strings.Repeat("=", fill) + strings.Repeat(" ", barWidth-fill)
	fmt.Fprintf(p.w, "\r[%s] %3.0f%% %d/%d %s %s\x1b[K", bar, 100*frac, p.finished, p.total, p.label, elapsed.Truncate(time.Second))
	p.shown = true
}
