package cli

import (
	"fmt"
	"io"
	"strings"

	"github.com/agentq/agentq/internal/record"
)

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
		return printJSONLine(p.w, e)
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
