package engine

import (
	"log/slog"
	"time"

	"github.com/agentq/agentq/internal/spec"
	"github.com/agentq/agentq/tasks"
)

// stepRun is one attempt of one step, as the handler passes it along
// (process → failed → deadLetter → settle): the task's payload, the spec,
// the step, its resolved settings and the attempt number Begin counted.
type stepRun struct {
	p       tasks.Payload
	spec    *spec.Spec
	st      *spec.Step
	r       spec.Resolved
	attempt int
	log     *slog.Logger // with the workflow and step ids
	// inst is set when the step is an instance of a map step (p.Step is
	// then "<id>[<n>]" and st the map step).
	inst *spec.Instance
	// deadline is the workflow's, if it has one: an outcome that arrives
	// past it ends the workflow timed out instead of being recorded (the
	// deadline's own task may be waiting for a worker slot that code
	// ignoring its context holds).
	deadline *time.Time
	// waitTimeout says the task is a signal step's timeout
	// (tasks.TypeSignalTimeout), not its own.
	waitTimeout bool
	// childEnded says the task tells a child workflow step its child
	// ended (tasks.TypeChildEnded).
	childEnded bool
}
