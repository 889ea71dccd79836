// Package retry holds agentq's failure policy as pure functions: what class
// a failed LLM call belongs to, and how long to wait before trying again.
// It imports nothing of agentq's own; shared state lives elsewhere.
package retry

import (
	"strings"
)

// Class is what kind of failure a call met (docs/failures.md lists them
// with what happens to each).
type Class string

// The classes, in the order docs/failures.md lists them.
const (
	OK            Class = "ok"
	Network       Class = "network"
	Timeout       Class = "timeout"
	Server        Class = "server"
	RateLimited   Class = "rate_limited"
	Quota         Class = "quota"
	Auth          Class = "auth"
	BadRequest    Class = "bad_request"
	ContextLength Class = "context_length"
	ContentFilter Class = "content_filter"
	NotFound      Class = "not_found"
	Canceled      Class = "canceled"
	// InvalidOutput is an answer that arrived but is unusable: not the
	// JSON the step asked for, or JSON that breaks its schema. The
	// provider answered, so it does not count against the breaker; it
	// does lower the target's health score (quality).
	InvalidOutput Class = "invalid_output"
	// OutputTooLarge is an answer longer than the step may keep (its
	// output limit): never cut to fit, it goes to the route's next target
	// and, when every target answers too much, the step is dead-lettered
	// naming the limit. The provider answered: no breaker hears of it.
	OutputTooLarge Class = "output_too_large"
	// Handler is a code step's own function failing with a plain error
	// (or a panic): retried with the usual backoff, then dead-lettered.
	// It says nothing about any provider.
	Handler Class = "handler"
	// BudgetExceeded is a call that was not sent because a token or spend
	// budget of its route, provider or workflow could not take it
	// (docs/budgets.md). Nobody failed: a period's budget resets when the
	// period ends; a workflow's cap does not.
	BudgetExceeded Class = "budget_exceeded"
	// Limit is a step refused because it would take its workflow past a
	// bound of the configuration (a child workflow past
	// limits.max_tree_workflows): dead-lettered at once, naming the bound
	// and its value, to be requeued once the bound is raised.
	Limit Class = "limit"
)

// The worker's own classes: an attempt that ended for a reason of the
// worker's, not of a provider's or of the step's function. They appear in
// records, dead letters and metrics like the others.
const (
	// Panic is a step whose function (or the handler) panicked.
	Panic Class = "panic"
	// LeaseExpired is a step whose worker lost the task's lease on its
	// last attempt (killed, cut off from Redis).
	LeaseExpired Class = "lease_expired"
	// Busy is a duplicate delivery of a step another task runs: it looks
	// again shortly.
	Busy Class = "busy"
	// Stale is an attempt whose outcome the store refused: a later
	// attempt took the step, or the safety net ended this one.
	Stale Class = "stale"
	// Unrecorded is an attempt whose answer could not be recorded (Redis
	// away too long); the worker keeps the answer in memory for the next.
	Unrecorded Class = "unrecorded"
	// Unconfirmed is an attempt whose outcome reached the Redis primary
	// but was not confirmed by the replicas redis.durability asks for:
	// its task is not acknowledged, and comes back to confirm it.
	Unconfirmed Class = "unconfirmed"
	// Unready is a step whose inputs are not all settled in its
	// workflow's record when its task runs (on a Cluster, a promotion of
	// the workflow's primary lost an input's settle): it looks again
	// shortly, until the input's own task has settled it again.
	Unready Class = "unready"
	// NotServed is a code step (or a tool) the worker has no function
	// for: handed back for a worker that serves it.
	NotServed Class = "not_served"
	// Archived, Missing and Unsettled are steps the reconciler found
	// running with a task asynq archived (for another reason than a
	// lease), lost, or completed without the step's outcome: it
	// dead-letters them to be requeued or discarded.
	Archived  Class = "archived"
	Missing   Class = "missing"
	Unsettled Class = "unsettled"
)

// Failure is what the classifier reads of a failed call.
type Failure struct {
	Status   int    // HTTP status; 0 when no response arrived
	Code     string // provider error code
	Type     string // provider error type
	Message  string // provider message (lower-cased for matching)
	Body     string // body excerpt
	Timeout  bool   // the call's deadline passed or the stream stalled
	Canceled bool   // the caller gave up (workflow canceled, shutdown)
	InStream bool   // the error came inside a 200 stream or cut the body
}

// Classify maps a failure to its class. It is a pure function.
func Classify(f Failure) Class {
	msg := [3]string{f.Message, f.Code, f.Type}
	switch {
	case f.Canceled:
		return Canceled
	case f.Timeout:
		return Timeout
	}
	switch f.Status {
	case 0:
		if f.InStream && f.Type != "" {
			return inStream(f)
		}
		return Network
	case 401, 403:
		return Auth
	case 404:
		return NotFound
	case 408:
		return Timeout
	case 400, 413, 422:
		switch {
		case contextLength(msg):
			return ContextLength
		case contentFilter(msg):
			return ContentFilter
		case f.Status == 413:
			return ContextLength
		}
		return BadRequest
	case 429:
		if mentions(msg, quotaWords) {
			return Quota
		}
		return RateLimited
	case 402:
		return Quota
	}
	switch {
	case f.Status == 529 || f.Status >= 500:
		return Server
	case f.Status >= 200 && f.Status < 300:
		return Server // an error event inside a 200 stream
	}
	return BadRequest
}

// inStream classifies an error event that arrived inside a 200 stream.
func inStream(f Failure) Class {
	switch f.Type {
	case "rate_limit_error":
		return RateLimited
	case "authentication_error", "permission_error":
		return Auth
	case "invalid_request_error":
		return BadRequest
	}
	return Server
}

var (
	contextLengthWords = []string{"context_length_exceeded", "context length", "context window",
		"prompt is too long", "maximum context", "too many tokens"}
	quotaWords         = []string{"quota", "billing", "spend limit"}
	contentFilterWords = []string{"content_filter", "content_policy", "content policy", "safety system"}
)

func contextLength(msg [3]string) bool { return mentions(msg, contextLengthWords) }

func contentFilter(msg [3]string) bool { return mentions(msg, contentFilterWords) }

// mentions reports whether any of texts contains any of words (lower-case
// ASCII), ignoring case, without allocating: classification runs on every
// failed call.
func mentions(texts [3]string, words []string) bool {
	for _, t := range texts {
		for _, w := range words {
			if containsFold(t, w) {
				return true
			}
		}
	}
	return false
}

func containsFold(s, sub string) bool {
	for i := 0; i+len(sub) <= len(s); i++ {
		if strings.EqualFold(s[i:i+len(sub)], sub) {
			return true
		}
	}
	return false
}
