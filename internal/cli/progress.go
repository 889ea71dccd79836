package cli

import (
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/agentq/agentq"
	"github.com/agentq/agentq/internal/spec"
)

// progress shows a waiting workflow: a bar redrawn in place on a terminal,
// one line per step change otherwise.
type progress struct {
	w     io.Writer
	tty   bool
	start time.Time
	seen  map[string]string // step id -> "state/attempts" last shown
	drawn bool
}

func newProgress(w io.Writer) *progress {
	return &progress{w: w, tty: isTerminal(w), start: time.Now(), seen: map[string]string{}}
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

func (p *progress) update(wf *agentq.Workflow) {
	if wf.Steps == nil && wf.Counts != nil {
		p.counts(wf) // a wide workflow: its counters, not its steps
		return
	}
	if p.tty {
		p.bar(wf)
		return
	}
	for _, s := range wf.Steps {
		key := fmt.Sprintf("%s/%d", s.State, s.Attempts)
		if m := s.Map; m != nil {
			key += fmt.Sprintf("/%d", 10*m.Settled/max(1, m.Items)) // a line per tenth of a map, not per instance
		}
		if p.seen[s.ID] == key {
			continue
		}
		p.seen[s.ID] = key
		line := fmt.Sprintf("%s %s: %s", elapsed(p.start), s.ID, s.State)
		if m := s.Map; m != nil {
			line += fmt.Sprintf(" (%d/%d items settled", m.Settled, m.Items)
			if m.Missing > 0 {
				line += fmt.Sprintf(", %d missing", m.Missing)
			}
			line += ")"
		}
		if s.Attempts > 1 {
			line += fmt.Sprintf(" (attempt %d)", s.Attempts)
		}
		if s.Degraded {
			line += " degraded"
		}
		switch {
		case s.State == "throttled":
			line += ": " + oneLine(s.Output, 200)
		case s.State == "waiting":
			if w := waitText(wf, s, 160); w != "" {
				line += " " + w
			}
		}
		if s.Error != "" && s.State != "done" {
			line += ": " + oneLine(s.Error, 160)
		}
		fmt.Fprintln(p.w, line)
	}
}

func (p *progress) bar(wf *agentq.Workflow) {
	const width = 24
	done, failed := 0, 0
	var running, decisions, signals, children, waiting []string
	for _, s := range wf.Steps {
		switch s.State {
		case "done":
			done++
		case "dead":
			failed++
		case "running":
			running = append(running, s.ID)
		case "waiting":
			switch s.WaitsFor {
			case spec.WaitApproval:
				decisions = append(decisions, s.ID)
			case spec.WaitSignal:
				signals = append(signals, s.ID)
			case spec.WaitChild:
				children = append(children, s.ID)
			default:
				waiting = append(waiting, s.ID)
			}
		}
	}
	n := max(1, len(wf.Steps))
	fill := width * (done + failed) / n
	line := fmt.Sprintf("\r[%s%s] %d/%d done", strings.Repeat("#", fill), strings.Repeat(".", width-fill), done, len(wf.Steps))
	if failed > 0 {
		line += fmt.Sprintf(", %d dead", failed)
	}
	if len(running) > 0 {
		line += " · running " + oneLine(strings.Join(running, ", "), 40)
	}
	if len(decisions) > 0 {
		line += " · waiting for a decision on " + oneLine(strings.Join(decisions, ", "), 40) + " (enqueue approve)"
	}
	if len(signals) > 0 {
		line += " · waiting for a signal on " + oneLine(strings.Join(signals, ", "), 40) + " (enqueue signal)"
	}
	if len(children) > 0 {
		line += " · waiting for a child workflow on " + oneLine(strings.Join(children, ", "), 40) + " (enqueue status)"
	}
	if len(waiting) > 0 {
		line += " · waiting on " + oneLine(strings.Join(waiting, ", "), 40)
	}
	line += " · " + elapsed(p.start)
	fmt.Fprintf(p.w, "%-100s", line)
	p.drawn = true
}

// counts shows a wide workflow by its counters: a line per change (per
// tenth of its steps off a terminal), redrawn in place on one.
func (p *progress) counts(wf *agentq.Workflow) {
	c := wf.Counts
	line := fmt.Sprintf("%s: %d/%d steps settled", wf.State, c.Settled, c.Steps)
	if c.Dead > 0 {
		line += fmt.Sprintf(", %d dead", c.Dead)
	}
	if p.tty {
		fmt.Fprintf(p.w, "\r%-100s", line+" · "+elapsed(p.start))
		p.drawn = true
		return
	}
	key := fmt.Sprintf("%s/%d/%d", wf.State, 10*c.Settled/max(1, c.Steps), c.Dead)
	if p.seen[""] != key {
		p.seen[""] = key
		fmt.Fprintln(p.w, elapsed(p.start)+" "+line)
	}
}

// done ends the bar's line.
func (p *progress) done() {
	if p.drawn {
		fmt.Fprintln(p.w)
	}
}

func elapsed(since time.Time) string {
	return fmt.Sprintf("%5.1fs", time.Since(since).Seconds())
}
