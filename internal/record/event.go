package record

import (
	"strconv"
	"strings"
	"time"
)

// Event types: what a workflow's event log says happened. A reader gets
// them in the order they happened, once each.
const (
	EventSubmitted   = "workflow.submitted" // Name
	EventRerun       = "workflow.rerun"     // Gen, Steps (the steps run again)
	EventEnded       = "workflow.ended"     // State (completed, failed, canceled, timed_out), Reason
	EventReady       = "step.ready"         // its inputs are settled (a map instance's is not logged)
	EventStarted     = "step.started"       // Attempt, Worker
	EventFailed      = "step.failed"        // Attempt, Class, Reason, NextAttemptAt (zero: not retried by a backoff)
	EventWaiting     = "step.waiting"       // an approval step waits for a person
	EventDone        = "step.done"          // Target, tokens, CostUSD
	EventDegraded    = "step.degraded"      // done with a degraded answer (instead of step.done)
	EventDead        = "step.dead"          // Class, Reason: dead-lettered
	EventCanceled    = "step.canceled"      // the workflow was canceled or timed out before it settled
	EventLLMCall     = "llm.call"           // Route, Target, Provider, Key, LatencyMS, tokens, CostUSD, Class (a failed call)
	EventToolTurn    = "tool.turn"          // Tools, Error
	EventDo          = "do.call"            // Name (the durable operation), Error
	EventDelta       = "step.delta"         // Text: streamed answer text
	EventStreamReset = "step.stream_reset"  // the streamed text so far is void (a retry or a failover)
	EventTruncated   = "log.truncated"      // Dropped: older entries the log's bound removed
)

// Event is one entry of a workflow's event log, as the event stream, the
// Go client and `enqueue follow` give it. Fields a type does not use are
// left out of its JSON.
type Event struct {
	// ID is the log entry's id: a reader resumes after it (SSE's
	// Last-Event-ID). It increases along the log.
	ID      string    `json:"id"`
	Type    string    `json:"type"`
	Step    string    `json:"step,omitempty"`
	Attempt int       `json:"attempt,omitempty"`
	At      time.Time `json:"at"`

	Name   string   `json:"name,omitempty"`
	State  string   `json:"state,omitempty"`
	Gen    int      `json:"gen,omitempty"`
	Steps  []string `json:"steps,omitempty"`
	Worker string   `json:"worker,omitempty"`

	Class         string     `json:"class,omitempty"`
	Reason        string     `json:"reason,omitempty"`
	NextAttemptAt *time.Time `json:"next_attempt_at,omitempty"`

	Route    string `json:"route,omitempty"`
	Target   string `json:"target,omitempty"`   // provider/model that answered
	Provider string `json:"provider,omitempty"` // the configured provider of an LLM call
	// Key is the fingerprint of the API key a call used, never the key.
	Key              string  `json:"key,omitempty"`
	LatencyMS        int64   `json:"latency_ms,omitempty"`
	PromptTokens     int     `json:"prompt_tokens,omitempty"`
	CompletionTokens int     `json:"completion_tokens,omitempty"`
	CostUSD          float64 `json:"cost_usd,omitempty"`

	Tools []string `json:"tools,omitempty"`
	Error string   `json:"error,omitempty"` // what a tool turn or a durable call failed with

	// Text is a step.delta's streamed text; with `events: { content: true }`
	// Prompt and Answer carry an LLM call's messages (redacted, bounded).
	Text   string `json:"text,omitempty"`
	Prompt string `json:"prompt,omitempty"`
	Answer string `json:"answer,omitempty"`

	Dropped int64 `json:"dropped,omitempty"`
}

// Final reports whether e ends a workflow's log: a workflow.ended event
// (a rerun may continue the log after it).
func (e Event) Final() bool { return e.Type == EventEnded }

// ValidEventID reports whether s is an event log entry's id: ms-seq.
func ValidEventID(s string) bool {
	_, _, ok := parseEventID(s)
	return ok
}

// EventIDBefore reports whether entry id a comes before b (both valid).
func EventIDBefore(a, b string) bool {
	am, as, _ := parseEventID(a)
	bm, bs, _ := parseEventID(b)
	return am < bm || am == bm && as < bs
}

func parseEventID(s string) (ms, seq uint64, ok bool) {
	m, q, found := strings.Cut(s, "-")
	if !found {
		return 0, 0, false
	}
	ms, err1 := strconv.ParseUint(m, 10, 64)
	seq, err2 := strconv.ParseUint(q, 10, 64)
	return ms, seq, err1 == nil && err2 == nil
}
