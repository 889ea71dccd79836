package producer

import (
	"context"
	"time"

	"github.com/agentq/agentq/internal/store"
)

// ScheduleInfo is one periodic workflow (the workers' schedules:) as its
// lease holder last recorded it. Its JSON shape is stable (enqueue
// schedule list --json and the dashboard's API print it).
type ScheduleInfo struct {
	Name string `json:"name"`
	Cron string `json:"cron"`
	// Workflow is the name of the spec it submits.
	Workflow string `json:"workflow"`
	// Holder is the worker that runs it now; empty: none holds its lease
	// (no worker with the schedule is alive).
	Holder       string     `json:"holder"`
	LastSlot     *time.Time `json:"last_slot"`
	LastWorkflow string     `json:"last_workflow"` // the id submitted for LastSlot
	NextSlot     *time.Time `json:"next_slot"`
}

// Schedules lists the schedules a worker ran within the last week, by
// name.
func (c *Client) Schedules(ctx context.Context) ([]ScheduleInfo, error) {
	now := time.Now
	if c.o.Now != nil {
		now = c.o.Now
	}
	states, err := store.NewSchedules(c.rdb).List(ctx, now())
	if err != nil {
		return nil, err
	}
	out := make([]ScheduleInfo, len(states))
	for i, s := range states {
		out[i] = ScheduleInfo{Name: s.Name, Cron: s.Cron, Workflow: s.Spec, Holder: s.Holder, LastSlot: s.LastSlot,
			LastWorkflow: s.LastWorkflow, NextSlot: s.Next}
	}
	return out, nil
}
