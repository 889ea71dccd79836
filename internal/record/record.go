// Package record holds the shapes of agentq's workflow records as callers
// read them: a workflow, its steps, their states and token usage. These are
// what enqueue --json, the dashboard's API and the Go client return.
package record

import (
	"errors"
	"time"
)

// ErrNotFound is returned for a workflow id that does not exist (or expired).
var ErrNotFound = errors.New("workflow not found")

// Workflow states.
const (
	StatePending   = "pending"
	StateRunning   = "running"
	StateBlocked   = "blocked" // a step was dead-lettered; dependents wait for a requeue
	StateCompleted = "completed"
	StateFailed    = "failed"
	StateCanceled  = "canceled"
	StateTimedOut  = "timed_out" // its deadline passed before it completed
	StateWaiting   = "waiting"   // an approval step waits for a person's decision
)

// States are the workflow states, in the order a workflow may reach them.
var States = []string{StatePending, StateRunning, StateWaiting, StateBlocked, StateCompleted, StateFailed, StateCanceled, StateTimedOut}

// Terminal reports whether a workflow state is final: completed, failed,
// canceled or timed_out. Blocked is not (a requeue resumes it).
func Terminal(state string) bool {
	return state == StateCompleted || state == StateFailed || state == StateCanceled || state == StateTimedOut
}

// Step states.
const (
	StepPending  = "pending"
	StepQueued   = "queued"
	StepRunning  = "running"
	StepDone     = "done"
	StepDead     = "dead" // dead-lettered: retries exhausted or not retryable
	StepCanceled = "canceled"
	// StepMapped is a map step (for_each) whose instances are running: it
	// becomes done when every instance has settled.
	StepMapped = "mapped"
	// StepWaiting is a step waiting for something outside its workflow:
	// a person's decision (approve:) or a signal (wait_for:).
	StepWaiting = "waiting"
	// StepThrottled is a step waiting for a slot of its concurrency key
	// (every slot is held): it holds no worker slot, and starts when one
	// frees.
	StepThrottled = "throttled"
)

// WaitsForKey is StepRecord.WaitsFor of a throttled step.
const WaitsForKey = "key"

// Usage counts tokens.
type Usage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
}

// Workflow is a workflow's record as commands print it (its JSON shape is
// part of the user contract: enqueue --json and the dashboard's API print it).
type Workflow struct {
	ID         string       `json:"id"`
	Name       string       `json:"name"`
	State      string       `json:"state"`
	Steps      []StepRecord `json:"steps"`
	CreatedAt  time.Time    `json:"created_at"`
	FinishedAt *time.Time   `json:"finished_at"`
	// DeadlineAt is when the workflow times out (its spec's deadline, or
	// the submit's), if it has one.
	DeadlineAt *time.Time `json:"deadline_at,omitempty"`
	// Generation counts the workflow's reruns (enqueue rerun): its step
	// tasks' ids carry it, so a rerun's never collide with earlier ones.
	Generation int `json:"generation,omitempty"`
	// Error says why a workflow ended without completing (a deadline that
	// passed, with the steps left unfinished).
	Error string `json:"error,omitempty"`
	// Counts are the workflow's step counters, kept as steps settle:
	// reading them costs the same however wide the workflow is.
	Counts *Counts `json:"counts,omitempty"`
	// Parent is, for a child workflow (a step's workflow:), the workflow
	// and step that started it.
	Parent *ParentRef `json:"parent,omitempty"`
	// IdempotencyKey is the key its submit carried: the caller's, or one
	// generated before the first write. Submitting the same spec and input
	// again with it returns this workflow instead of starting another, so
	// a submit that was told "unreachable" or "not confirmed" is retried
	// safely with it. Empty for a child workflow and for workflows an
	// earlier agentq wrote.
	IdempotencyKey string `json:"idempotency_key,omitempty"`
	// CostByProvider is what its priced LLM calls cost, by the provider
	// that answered each (code steps, tool loops and maps included, every
	// run), counted call by call as the workers make them.
	CostByProvider map[string]float64 `json:"cost_by_provider,omitempty"`
}

// ParentRef names the step that started a child workflow.
type ParentRef struct {
	Workflow string `json:"workflow"`
	Step     string `json:"step"`
}

// Counts are a workflow's step counters (a map step counts once).
type Counts struct {
	Steps   int `json:"steps"`   // steps in the spec
	Settled int `json:"settled"` // done, or dead and optional
	Dead    int `json:"dead"`    // dead and not optional: each blocks the workflow
}

// StepRecord is one step's state and result.
type StepRecord struct {
	ID       string `json:"id"`
	State    string `json:"state"`
	Attempts int    `json:"attempts"`
	Output   string `json:"output"`
	// JSON is Output parsed, for steps with output.format json (filled in
	// by tasks.Client, not stored).
	JSON      any     `json:"json,omitempty"`
	ToolCalls RawJSON `json:"tool_calls,omitempty"` // JSON list of tool calls the model made, as a JSON array
	Degraded  bool    `json:"degraded"`
	Error     string  `json:"error"`
	// Class is, for a dead step, the error class that ended it.
	Class  string `json:"class,omitempty"`
	Target string `json:"target"`
	Usage  Usage  `json:"usage"`
	// CostUSD is what the step's calls cost at the workers' prices (a map
	// step's: its instances'), in the prices' currency; 0: unknown.
	CostUSD    float64    `json:"cost_usd,omitempty"`
	StartedAt  *time.Time `json:"started_at,omitempty"`
	FinishedAt *time.Time `json:"finished_at,omitempty"`
	// NextAttemptAt is, for a step waiting between attempts (a failed
	// attempt's backoff), when its next attempt is due; nil otherwise.
	NextAttemptAt *time.Time `json:"next_attempt_at,omitempty"`
	InputHash     string     `json:"-"`
	// Unserved, on a pending or queued step, says why no live worker can
	// run it (computed when read, never stored).
	Unserved string `json:"unserved,omitempty"`
	// Child is, for a child workflow step (workflow:), the child workflow
	// it started last (a rerun or a requeue starts another; the earlier
	// ones name their parent still).
	Child string `json:"child,omitempty"`
	// WaitsFor, on a waiting or throttled step, is what it waits for:
	// "approval" (a person's decision), "signal" or "key" (a slot of its
	// concurrency key); Output says which. Computed when read.
	WaitsFor string `json:"waits_for,omitempty"`
	// Map, on a map step (for_each) that has expanded, counts its
	// instances; the instances themselves are read a page at a time.
	Map *MapCounts `json:"map,omitempty"`
}

// MapCounts are a map step's instance counters, kept as the instances
// settle (reading them costs the same whatever the map's width).
type MapCounts struct {
	Items   int `json:"items"`   // instances the map has
	Started int `json:"started"` // instances released to the queue (max_parallel's window)
	Settled int `json:"settled"` // instances done, or dead and optional
	Missing int `json:"missing"` // optional instances that were dead-lettered
}

// KeyInfo is one provider key as the fleet knows it: its names (never the
// key), its shared state, and how many live workers advertise it.
type KeyInfo struct {
	Provider    string     `json:"provider"`
	Fingerprint string     `json:"fingerprint"` // provider#N and the end of the key's hash
	ID          string     `json:"id"`
	State       string     `json:"state"` // KeyOK, KeyCooling or KeyDisabled
	CoolUntil   *time.Time `json:"cool_until,omitempty"`
	Disabled    string     `json:"disabled,omitempty"` // the reason
	Workers     int        `json:"workers"`
}

// ErrUnknownKey wraps a key reference that names no known key.
var ErrUnknownKey = errors.New("unknown key")

// EnableResult is what enabling keys did, by fingerprint.
type EnableResult struct {
	Enabled    []string `json:"enabled"`     // were disabled or cooling, now enabled
	NotChanged []string `json:"not_changed"` // were neither
}

// Key states of KeyInfo.
const (
	KeyOK       = "ok"
	KeyCooling  = "cooling"  // rate-limited: rests until CoolUntil, for every worker
	KeyDisabled = "disabled" // quota spent or refused: until a person enables it
)
