package worker

import (
	"context"

	"github.com/agentq/agentq/internal/app"
	"github.com/agentq/agentq/internal/schedule"
)

// schedules runs the configuration's schedules (docs/schedules.md): only a
// worker whose configuration has any competes for their leases. The zero
// value runs none.
type schedules struct {
	a       *app.App
	entries []schedule.Entry
}

// newSchedules reads the schedules' specs (a bad one stops the worker
// before it takes a step: a *config.FieldError naming the schedule).
// a must have the Producer part: runs are submitted through it.
func newSchedules(a *app.App) (schedules, error) {
	if len(a.Config.Schedules) == 0 {
		return schedules{}, nil
	}
	entries, err := schedule.FromConfig(a.Config, app.ClientOptions(a.Config))
	if err != nil {
		return schedules{}, err
	}
	return schedules{a: a, entries: entries}, nil
}

// start runs them, as holder, until ctx ends (the worker's stop: the
// leases are given up at once, so another worker takes over while this
// one drains); the func it returns waits for that.
func (s schedules) start(ctx context.Context, holder string) func() {
	if len(s.entries) == 0 {
		return func() {}
	}
	var fired func(schedule.Fire)
	if m := s.a.Metrics; m != nil {
		fired = func(f schedule.Fire) { m.ScheduleFired(f.Schedule, f.Existing) }
	}
	sch, err := schedule.New(schedule.Options{Entries: s.entries, Client: s.a.Client, Redis: s.a.Redis, Holder: holder, Logger: s.a.Logger, Fired: fired})
	if err != nil { // the entries come from FromConfig: not reached
		s.a.Logger.Error("schedules not started", "err", err)
		return func() {}
	}
	done := make(chan struct{})
	go func() { defer close(done); _ = sch.Run(ctx) }()
	s.a.Logger.Info("schedules started", "schedules", len(s.entries))
	return func() { <-done }
}
