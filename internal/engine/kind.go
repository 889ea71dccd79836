package engine

import (
	"context"

	"github.com/agentq/agentq/internal/spec"
	"github.com/agentq/agentq/internal/store"
)

// runner is a step kind's run side: one attempt of a step Begin let
// through, views its inputs. A kind's spec side (Kind) names it.
type runner interface {
	run(ctx context.Context, h *Handler, run *stepRun, a *store.Attempt, views map[string]spec.StepView) error
}

// kind is a whole step kind: its spec side and its run side.
type kind interface {
	spec.Kind
	runner
}

// runners are the kinds' run sides by name.
var runners = map[string]runner{
	spec.KindPrompt:   promptRun{},
	spec.KindTools:    toolLoopRun{},
	spec.KindCode:     codeRun{},
	spec.KindApproval: approvalRun{},
	spec.KindSignal:   signalRun{},
	spec.KindChild:    childRun{},
}

// registerKind adds kind k, marked in a step by its own field key: its
// spec side (spec.RegisterKind, which refuses a name or key taken) and its
// run side. Register from an init function.
func registerKind(key string, k kind) error {
	if err := spec.RegisterKind(key, k); err != nil {
		return err
	}
	runners[k.Name()] = k
	return nil
}

// runnerOf is the run side of spec step st's kind; a map step's expands
// its items, then runs each instance as a step of its kind. nil for a
// kind that has no run side.
func runnerOf(st *spec.Step) runner {
	k := spec.KindOf(st)
	if m, ok := k.(spec.MapKind); ok {
		each := runners[m.Each.Name()]
		if each == nil {
			return nil
		}
		return mapRun{each: each}
	}
	return runners[k.Name()]
}

// needsRegistered is a run side that needs something registered on the
// worker that runs it (a code step's function, a prompt's tools).
type needsRegistered interface {
	servedBy(h *Handler, st *spec.Step) bool
}

// serves reports whether this worker can run step st itself: a worker
// hands on only the steps it serves (handoff.go).
func (h *Handler) serves(st *spec.Step) bool {
	if n, ok := runnerOf(st).(needsRegistered); ok {
		return n.servedBy(h, st)
	}
	return true
}
