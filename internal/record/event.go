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
	EventWaiting     = "step.waiting"       // Reason: an approval step waits for a person, a signal step for its signal
	EventThrottled   = "step.throttled"     // Reason: the step waits for a slot of its concurrency key
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
	// ID is the event's id (EventID): a reader resumes after it (SSE's
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

// An event's id is its log entry's ("ms-seq"), followed for the second
// and later events of an entry by "." and its place ("ms-seq.2").

// EventID is the id of the event at place i of entry.
func EventID(entry string, i int) string {
	if i == 0 {
		return entry
	}
	return entry + "." + strconv.Itoa(i)
}

// SplitEventID returns an event id's entry and place.
func SplitEventID(id string) (entry string, place int, ok bool) {
	entry, p, dotted := strings.Cut(id, ".")
	if _, _, ok := parseEntryID(entry); !ok {
		return "", 0, false
	}
	if dotted {
		n, err := strconv.Atoi(p)
		if err != nil || n < 1 || strconv.Itoa(n) != p {
			return "", 0, false
		}
		place = n
	}
	return entry, place, true
}

// ValidEventID reports whether s is an event's id.
func ValidEventID(s string) bool {
	_, _, ok := SplitEventID(s)
	return ok
}

// EventIDBefore reports whether event id a comes before b (both valid).
func EventIDBefore(a, b string) bool {
	ae, ap, _ := SplitEventID(a)
	be, bp, _ := SplitEventID(b)
	am, as, _ := parseEntryID(ae)
	bm, bs, _ := parseEntryID(be)
	return am < bm || am == bm && (as < bs || as == bs && ap < bp)
}

func parseEntryID(s string) (ms, seq uint64, ok bool) {
	m, q, found := strings.Cut(s, "-")
	if !found {
		return 0, 0, false
	}
	ms, err1 := strconv.ParseUint(m, 10, 64)
	seq, err2 := strconv.ParseUint(q, 10, 64)
	return ms, seq, err1 == nil && err2 == nil
}
