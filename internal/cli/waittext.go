package cli

import (
	"strings"

	"github.com/agentq/agentq"
	"github.com/agentq/agentq/internal/spec"
)

// waitText says what waiting step s of workflow wf waits for, and how the
// wait ends, for status and progress lines ("for a decision (enqueue
// approve …)", "for signal paid matching "o-1" (enqueue signal)", "for
// child workflow wf_… (enqueue status wf_…)"). n bounds the step's own
// text shown with it.
func waitText(wf *agentq.Workflow, s agentq.StepRecord, n int) string {
	switch s.WaitsFor {
	case spec.WaitApproval:
		return "for a decision (enqueue approve " + wf.ID + " " + s.ID + " [--reject]): " + oneLine(s.Output, n)
	case spec.WaitSignal:
		what := "a signal"
		if rest, ok := strings.CutPrefix(s.Output, "waits for "); ok { // spec.SignalWaitText
			what = rest
		}
		return "for " + oneLine(what, n) + " (enqueue signal)"
	case spec.WaitChild:
		if s.Child == "" {
			return "for its child workflow, not started yet"
		}
		return "for child workflow " + s.Child + " (enqueue status " + s.Child + ")"
	}
	if s.Output == "" {
		return ""
	}
	return "(" + oneLine(s.Output, n) + ")" // a wait this CLI does not know: what the step says, no guess
}
