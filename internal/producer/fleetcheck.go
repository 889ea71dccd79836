package producer

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/agentq/agentq/internal/record"
	"github.com/agentq/agentq/internal/spec"
	"github.com/agentq/agentq/internal/store"
)

// ErrNoWorkers is returned by Submit when no live worker has advertised
// itself: nothing would run the workflow until one starts.
var ErrNoWorkers = errors.New("no live worker")

// SubmitSettings are what SubmitOptions set.
type SubmitSettings struct {
	// SkipWorkerCheck submits without checking the spec against what
	// live workers serve (the steps wait until a worker serves them).
	SkipWorkerCheck bool
	// IdempotencyKey, when set, makes the submit idempotent
	// (WithIdempotencyKey).
	IdempotencyKey string
	// Deadline, when positive, bounds the workflow to this long from the
	// submit, instead of its spec's deadline (WithDeadline).
	Deadline time.Duration
}

// SubmitOption changes one Submit.
type SubmitOption func(*SubmitSettings)

// WithoutWorkerCheck submits without checking the spec against what live
// workers serve.
func WithoutWorkerCheck() SubmitOption {
	return func(s *SubmitSettings) { s.SkipWorkerCheck = true }
}

// ApplySubmitOptions returns the settings opts make.
func ApplySubmitOptions(opts ...SubmitOption) SubmitSettings {
	var s SubmitSettings
	for _, o := range opts {
		if o != nil {
			o(&s)
		}
	}
	return s
}

// serving is the union of what live workers serve on one queue.
type serving struct {
	names  map[string]map[string]bool // kind ("route", "handler", "tool") → names
	shards map[int]bool               // the shard counts workers serve it in (1: not sharded)
}

// fleetView is what the live workers serve, by queue.
type fleetView struct {
	workers int
	queues  map[string]*serving
}

func newFleetView(ads []store.WorkerAd) fleetView {
	v := fleetView{workers: len(ads), queues: map[string]*serving{}}
	for _, ad := range ads {
		for q := range ad.Queues {
			sv := v.queues[q]
			if sv == nil {
				sv = &serving{names: map[string]map[string]bool{"route": {}, "handler": {}, "tool": {}}, shards: map[int]bool{}}
				v.queues[q] = sv
			}
			for _, n := range store.ServedCounts(ad, q) {
				sv.shards[n] = true
			}
			for kind, names := range map[string][]string{"route": ad.Routes, "handler": ad.Handlers, "tool": ad.Tools} {
				for _, n := range names {
					sv.names[kind][n] = true
				}
			}
		}
	}
	return v
}

// mustServe reports whether a live worker must meet need: a route or a
// handler always; a tool only when the step names it alone (tools:
// [name]), the same rule the handler applies, so only a worker that runs
// it can offer it. A tool the spec describes as a mapping is passed
// through to the model when no worker runs it.
func mustServe(s *spec.Spec, n spec.Need) bool {
	if n.Kind != "tool" {
		return true
	}
	st, ok := s.Step(n.Step)
	if !ok {
		return false
	}
	for _, t := range st.Tools {
		server, _ := spec.MCPServerOf(t.Name) // mcp:NAME/TOOL needs a worker serving mcp:NAME
		if (t.Name == n.Name || server == n.Name) && spec.NamedTool(t) {
			return true
		}
	}
	return false
}

// unserved says why no live worker serves need, its queue in shards
// shards ("" when one does).
func (v fleetView) unserved(n spec.Need, shards int) string {
	sv := v.queues[n.Queue]
	if sv == nil {
		return fmt.Sprintf("no live worker serves queue %q%s", n.Queue, listed(" (live workers serve queues: %s)", v.queueNames()))
	}
	if msg := sv.otherCount(n.Queue, shards); msg != "" {
		return msg
	}
	if sv.names[n.Kind][n.Name] {
		return ""
	}
	served := listed(" (live workers serve: %s)", sorted(sv.names[n.Kind]))
	if served == "" {
		served = fmt.Sprintf(" (live workers on it serve no %ss)", n.Kind)
	}
	return fmt.Sprintf("no live worker serves %s %q on queue %s%s", n.Kind, n.Name, n.Queue, served)
}

// otherCount says why queue's shards at count shards are not served by
// the workers that serve it ("" when they are).
func (sv *serving) otherCount(queue string, shards int) string {
	if shards = max(shards, 1); sv.shards[shards] {
		return ""
	}
	counts := make([]string, 0, len(sv.shards))
	for c := range sv.shards {
		counts = append(counts, strconv.Itoa(c))
	}
	sort.Strings(counts)
	return fmt.Sprintf("queue %q is in %d shard(s) for this workflow, but live workers serve it in %s: workers and producers must read the same queues: (queues.%s.shards)",
		queue, shards, strings.Join(counts, " or "), queue)
}

func (v fleetView) queueNames() []string {
	out := make([]string, 0, len(v.queues))
	for q := range v.queues {
		out = append(out, q)
	}
	sort.Strings(out)
	return out
}

func sorted(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// listed formats names into format's %s, at most 20 of them ("" if none).
func listed(format string, names []string) string {
	if len(names) == 0 {
		return ""
	}
	s := strings.Join(names[:min(len(names), 20)], ", ")
	if len(names) > 20 {
		s += fmt.Sprintf(" and %d more", len(names)-20)
	}
	return fmt.Sprintf(format, s)
}

// checkServed refuses a spec that live workers cannot run: ErrNoWorkers
// when there is none, else one SpecError (ErrInvalidSpec) per need of a
// step that no live worker serves.
func checkServed(wspec *spec.Spec, ads []store.WorkerAd, shards map[string]int) error {
	if len(ads) == 0 {
		return fmt.Errorf("%w: no worker has advertised itself in Redis (a running worker renews its advertisement every 10s)", ErrNoWorkers)
	}
	v := newFleetView(ads)
	index := map[string]int{}
	for i, st := range wspec.Steps {
		index[st.ID] = i
	}
	var errs []error
	said := map[string]bool{}
	for _, n := range wspec.Needs() {
		if !mustServe(wspec, n) {
			continue
		}
		msg := v.unserved(n, shards[n.Queue])
		if msg == "" || said[n.Step+"\x00"+msg] {
			continue
		}
		said[n.Step+"\x00"+msg] = true
		i := index[n.Step]
		errs = append(errs, &spec.SpecError{Line: wspec.LineOf(fmt.Sprintf("steps[%d]", i)), Where: fmt.Sprintf("steps[%d] (%s)", i, n.Step), Msg: msg})
	}
	// every step's queue at its count, a step with no need too (an
	// approval, a signal, a child workflow): its task goes there
	for i := range wspec.Steps {
		st := &wspec.Steps[i]
		q := spec.Resolve(wspec, st).Queue
		sv := v.queues[q]
		if sv == nil {
			continue
		}
		if msg := sv.otherCount(q, shards[q]); msg != "" && !said[st.ID+"\x00"+msg] {
			said[st.ID+"\x00"+msg] = true
			errs = append(errs, &spec.SpecError{Line: wspec.LineOf(fmt.Sprintf("steps[%d]", i)), Where: fmt.Sprintf("steps[%d] (%s)", i, st.ID), Msg: msg})
		}
	}
	return errors.Join(errs...)
}

// markUnserved fills in Unserved on each pending or queued step of an
// unfinished workflow (of spec wspec) that no live worker serves. It
// reads the advertisements only when there is such a step.
func (c *Client) markUnserved(ctx context.Context, wf *Workflow, wspec *spec.Spec) error {
	if store.Terminal(wf.State) {
		return nil
	}
	waiting := map[string]int{}
	for i, s := range wf.Steps {
		if s.State == record.StepPending || s.State == record.StepQueued {
			waiting[s.ID] = i
		}
	}
	if len(waiting) == 0 {
		return nil
	}
	ads, err := c.fleet.Live(ctx)
	if err != nil {
		return err
	}
	v := newFleetView(ads)
	for _, n := range wspec.Needs() {
		i, ok := waiting[n.Step]
		if !ok || wf.Steps[i].Unserved != "" || !mustServe(wspec, n) {
			continue
		}
		wf.Steps[i].Unserved = v.unserved(n, wspec.Shards[n.Queue])
	}
	return nil
}
