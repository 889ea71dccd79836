package spec

import "time"

// Resolved is a step with the workflow's defaults applied.
type Resolved struct {
	Route      string
	Timeout    time.Duration
	MaxRetries int
	// Queue is the step's queue, as the spec names it (flow.TaskQueue is
	// the asynq queue its tasks go to).
	Queue string
	// Shards is how many shards Queue had when the workflow was
	// submitted (0 or 1: none).
	Shards int
}

// Resolve is step st of spec s with the workflow's defaults applied.
func Resolve(s *Spec, st *Step) Resolved {
	r := Resolved{Route: st.Route, Timeout: time.Duration(st.Timeout), Queue: st.Queue}
	if r.Route == "" {
		r.Route = s.Defaults.Route
	}
	if r.Timeout == 0 {
		r.Timeout = time.Duration(s.Defaults.Timeout)
	}
	if r.Timeout == 0 {
		r.Timeout = DefaultTimeout
	}
	switch {
	case st.MaxRetries != nil:
		r.MaxRetries = *st.MaxRetries
	case s.Defaults.MaxRetries != nil:
		r.MaxRetries = *s.Defaults.MaxRetries
	default:
		r.MaxRetries = DefaultMaxRetries
	}
	if r.Queue == "" {
		r.Queue = s.Defaults.Queue
	}
	if r.Queue == "" {
		r.Queue = DefaultQueue
	}
	r.Shards = s.Shards[r.Queue]
	return r
}
