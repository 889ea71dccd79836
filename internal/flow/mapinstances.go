package flow

import (
	"context"
	"strings"

	"github.com/agentq/agentq/internal/record"
	"github.com/agentq/agentq/internal/spec"
	"github.com/agentq/agentq/internal/store"
)

// A step is one task, but a map step's instances are tasks of their own:
// a cancel stops them (mapInstanceTasks) and a rerun closes them.

// mapInstanceTasks are a map step's released instances not done: their
// tasks may wait or run. Instances are read a page at a time (one HMGET per
// page), so a cancel of a 10,000-item map looks up only the instances
// still in flight.
func mapInstanceTasks(ctx context.Context, rec *store.Store, wf string, st *spec.Step, r *record.StepRecord, gen int, queue string) []StepTask {
	m := r.Map
	if m == nil || !st.IsMap() {
		return nil
	}
	var out []StepTask
	for from := 0; from < m.Started; from += OutputsPage {
		page, err := rec.InstanceProgress(ctx, wf, st.ID, from, min(OutputsPage, m.Started-from))
		for n := range min(OutputsPage, m.Started-from) {
			if err == nil && page[n].State == store.StepDone {
				continue // done: its task finished (a dead one may have been requeued from the dead-letter queue)
			}
			if err == nil && page[n].State == store.StepWaiting {
				// parked (a child, a signal, a person): its task ended, or is
				// ending, and starts nothing in an ended workflow (a child's
				// spawn is refused in a canceled tree); a map of thousands of
				// waiting children is canceled without a look at each task
				continue
			}
			inst := record.InstanceID(st.ID, from+n)
			own := StepTaskID(wf, inst, gen)
			out = append(out, StepTask{Step: inst, Queue: queue, ID: own})
			if err == nil && strings.HasPrefix(page[n].Owner, own+":") {
				out = append(out, StepTask{Step: inst, Queue: queue, ID: page[n].Owner}) // a concurrency grant's task runs it
			}
		}
	}
	return out
}

// OutputsPage is how many instances one read loads.
const OutputsPage = 500

// MapItems is how many instances map step st has; ok false for a step
// that is not a map (or has not expanded).
func MapItems(ctx context.Context, rec *store.Store, wf string, st *spec.Step) (int, bool) {
	if !st.IsMap() {
		return 0, false
	}
	m, err := rec.Counts(ctx, wf, st.ID)
	if err != nil || m == nil {
		return 0, false
	}
	return m.Items, true
}
