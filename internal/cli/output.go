package cli

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/agentq/agentq"
	"github.com/agentq/agentq/internal/flow"
)

// printWorkflow writes a workflow for people: a header, one line a step,
// and each step's error if it has one.
func printWorkflow(w io.Writer, wf *agentq.Workflow, cl *agentq.Client) {
	took := ""
	if wf.FinishedAt != nil {
		took = " in " + wf.FinishedAt.Sub(wf.CreatedAt).Round(10*time.Millisecond).String()
	}
	var prompt, completion int
	for _, s := range wf.Steps {
		prompt += s.Usage.PromptTokens
		completion += s.Usage.CompletionTokens
	}
	cost := ""
	if c, ok := cl.Cost(wf); ok && (cl.Priced() || c > 0) {
		cost = fmt.Sprintf(", cost %.4f%s", c, costByProvider(wf))
	}
	fmt.Fprintf(w, "workflow %s (%s): %s%s · tokens %d/%d%s\n", wf.ID, wf.Name, wf.State, took, prompt, completion, cost)
	if wf.Parent != nil {
		fmt.Fprintf(w, "  a child of workflow %s, step %s\n", wf.Parent.Workflow, wf.Parent.Step)
	}
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	for _, s := range wf.Steps {
		flags := ""
		if s.Degraded {
			flags = " degraded"
		}
		if s.Unserved != "" {
			flags += " unserved"
		}
		if m := s.Map; m != nil {
			flags += fmt.Sprintf(" (%d/%d items settled", m.Settled, m.Items)
			if m.Missing > 0 {
				flags += fmt.Sprintf(", %d missing", m.Missing)
			}
			flags += ")"
		}
		target := s.Target
		if target == "" {
			target = "-"
		}
		if s.NextAttemptAt != nil { // between attempts: not running, waiting out a backoff
			flags += fmt.Sprintf(" (next attempt at %s, in %s)", s.NextAttemptAt.Local().Format("15:04:05"),
				max(time.Until(*s.NextAttemptAt), 0).Round(time.Second))
		}
		fmt.Fprintf(tw, "  %s\t%s%s\tattempts=%d\t%s\ttokens=%d/%d\n", s.ID, s.State, flags, s.Attempts, target,
			s.Usage.PromptTokens, s.Usage.CompletionTokens)
	}
	tw.Flush()
	for _, s := range wf.Steps {
		if s.Error != "" && s.State != "done" {
			fmt.Fprintf(w, "  %s error: %s\n", s.ID, oneLine(s.Error, 300))
		}
		if s.Unserved != "" {
			fmt.Fprintf(w, "  %s unserved: %s\n", s.ID, oneLine(s.Unserved, 300))
		}
		switch {
		case s.State == "throttled":
			fmt.Fprintf(w, "  %s %s\n", s.ID, oneLine(s.Output, 300))
		case s.State == "waiting":
			fmt.Fprintf(w, "  %s waits %s\n", s.ID, waitText(wf, s, 300))
		}
	}
}

// costByProvider is " (oa 0.0100, an 0.0023)": a workflow's priced cost
// by who answered, for status; empty when one paid all.
func costByProvider(wf *agentq.Workflow) string {
	return flow.CostByProviderText(agentq.CostByProvider(wf))
}

func oneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > n {
		s = strings.ToValidUTF8(s[:n], "") + "…" // never a rune cut in half
	}
	return s
}
