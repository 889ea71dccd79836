package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/agentq/agentq/internal/client"
	"github.com/agentq/agentq/internal/producer"
	"github.com/agentq/agentq/internal/record"
)

func followCmd(c *common) *cobra.Command {
	var (
		asJSON bool
		after  string
	)
	cmd := &cobra.Command{
		Use:   "follow ID",
		Short: "Follow a workflow's events live: a line per step change and LLM call, streamed text as it comes",
		Long: `follow prints a workflow's event log (docs/events.md) from its start (or
after --after ID) and then each event as it happens: steps ready, started,
failed (with the class and when the next attempt is due), done, dead; every
LLM call (route, target, key fingerprint, latency, tokens); tool turns;
and streamed text. It stops when the workflow completes, fails, is
canceled, times out or is blocked on a dead-lettered step, and exits as
--wait does: 0 completed, 1 otherwise. --json prints one JSON event a line.`,
		Example: "  enqueue follow wf_abc123\n  enqueue follow wf_abc123 --json | jq -r .type",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return withClient(cmd, c, func(cl *client.Client) error {
				if after != "" && !record.ValidEventID(after) {
					return usageErr("--after: %q is not an event id (ms-seq)", after)
				}
				return follow(cmd.Context(), cmd.OutOrStdout(), cl, args[0], after, asJSON)
			})
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print one JSON event a line")
	cmd.Flags().StringVar(&after, "after", "", "start after this event id (the id of the last event seen)")
	return cmd
}

// follow prints a workflow's events until it is over (as Wait decides:
// ended, or blocked), then its state, and returns the exit --wait would.
func follow(ctx context.Context, w io.Writer, cl *client.Client, id, after string, asJSON bool) error {
	p := &eventPrinter{w: w, json: asJSON}
	gen := -1 // the run the events read are of (-1: not known yet, from a resumed read)
	for e, err := range cl.Events(ctx, id, after) {
		if err != nil {
			p.endLine()
			return notFound(err, id)
		}
		if err := p.print(e); err != nil {
			return err
		}
		switch e.Type {
		case record.EventSubmitted:
			gen = 0
		case record.EventRerun:
			gen = e.Gen
		}
		// a dead step may block the workflow: --wait stops there, so does
		// follow, unless this is the history of a run a rerun followed
		if e.Type == record.EventDead || e.Type == record.EventEnded {
			wf, err := cl.Status(ctx, id)
			if err != nil {
				return notFound(err, id)
			}
			if producer.Settled(wf.State) && (gen < 0 || wf.Generation == gen) {
				p.endLine()
				if !asJSON && e.Type != record.EventEnded {
					fmt.Fprintf(w, "workflow %s is %s\n", id, wf.State)
				}
				return endState(wf)
			}
		}
	}
	p.endLine()
	wf, err := cl.Status(ctx, id)
	if err != nil {
		return notFound(err, id)
	}
	return endState(wf)
}

// eventPrinter renders events a line each; streamed text is printed as it
// comes, under its step.
type eventPrinter struct {
	w    io.Writer
	json bool
	text string // the step whose streamed text is being printed
}

func (p *eventPrinter) endLine() {
	if p.text != "" {
		fmt.Fprintln(p.w)
		p.text = ""
	}
}

func (p *eventPrinter) print(e record.Event) error {
	if p.json {
		b, err := json.Marshal(e)
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(p.w, "%s\n", b)
		return err
	}
	if e.Type == record.EventDelta {
		if p.text != e.Step {
			p.endLine()
			fmt.Fprintf(p.w, "%s %s > ", e.At.Local().Format("15:04:05.000"), e.Step)
			p.text = e.Step
		}
		_, err := io.WriteString(p.w, e.Text)
		return err
	}
	p.endLine()
	_, err := fmt.Fprintf(p.w, "%s %s\n", e.At.Local().Format("15:04:05.000"), eventLine(e))
	return err
}

// eventLine says what an event says, in a line.
func eventLine(e record.Event) string {
	var b strings.Builder
	step := e.Step
	if step == "" {
		step = "workflow"
	}
	b.WriteString(step + " ")
	switch e.Type {
	case record.EventSubmitted:
		b.WriteString("submitted " + e.Name)
	case record.EventRerun:
		fmt.Fprintf(&b, "rerun (run %d) from %s", e.Gen, strings.Join(e.Steps, ", "))
	case record.EventEnded:
		b.WriteString(e.State)
		if e.Reason != "" {
			b.WriteString(": " + e.Reason)
		}
	case record.EventReady:
		b.WriteString("ready")
	case record.EventStarted:
		fmt.Fprintf(&b, "started, attempt %d", e.Attempt)
		if e.Worker != "" {
			b.WriteString(" on " + e.Worker)
		}
	case record.EventFailed:
		fmt.Fprintf(&b, "attempt %d failed (%s): %s", e.Attempt, e.Class, oneLine(e.Reason, 200))
		if e.NextAttemptAt != nil {
			fmt.Fprintf(&b, "; next attempt due %s", e.NextAttemptAt.Local().Format("15:04:05"))
		}
	case record.EventLLMCall:
		fmt.Fprintf(&b, "llm %s -> %s", e.Route, e.Target)
		if e.Key != "" {
			b.WriteString(" key " + e.Key)
		}
		fmt.Fprintf(&b, " %dms", e.LatencyMS)
		if e.Class != "" {
			b.WriteString(" " + e.Class)
		} else {
			fmt.Fprintf(&b, " %d+%d tokens", e.PromptTokens, e.CompletionTokens)
		}
	case record.EventToolTurn:
		b.WriteString("tools " + strings.Join(e.Tools, ", "))
		if e.Error != "" {
			b.WriteString("; error: " + oneLine(e.Error, 200))
		}
	case record.EventDo:
		b.WriteString("do " + e.Name)
		if e.Error != "" {
			b.WriteString(" failed: " + oneLine(e.Error, 200))
		}
	case record.EventDone, record.EventDegraded:
		b.WriteString(strings.TrimPrefix(e.Type, "step."))
		if e.Target != "" {
			b.WriteString(" by " + e.Target)
		}
		if e.PromptTokens+e.CompletionTokens > 0 {
			fmt.Fprintf(&b, " (%d+%d tokens)", e.PromptTokens, e.CompletionTokens)
		}
		if e.CostUSD > 0 {
			fmt.Fprintf(&b, " $%.6f", e.CostUSD)
		}
	case record.EventDead:
		b.WriteString("dead-lettered: " + oneLine(e.Reason, 200))
	case record.EventCanceled:
		b.WriteString("canceled")
	case record.EventWaiting, record.EventThrottled:
		b.WriteString(oneLine(e.Reason, 200))
	case record.EventStreamReset:
		b.WriteString("stream reset: the text so far is void (a retry or a failover)")
	case record.EventTruncated:
		fmt.Fprintf(&b, "log truncated: %d older events were dropped (events.limit)", e.Dropped)
	default:
		b.WriteString(e.Type)
	}
	return b.String()
}
