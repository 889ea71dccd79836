package retry

import (
	"context"
	"errors"
	"slices"
)

// Rule is what every policy does with a class. It is the one place a set
// of classes is spelled out: the router, the breaker, the health score and
// the step handler ask a class for its rule instead of listing classes.
type Rule struct {
	// Retryable: trying the same step again later (possibly elsewhere) may
	// succeed.
	Retryable bool
	// RequestFault: the request itself is at fault, so no other key or
	// target can help (only the route's fallback for this class, if any)
	// and the route stops on it even after others failed for their own
	// reasons.
	RequestFault bool
	// ProviderFault: the target failed; counts against its breaker and
	// health score.
	ProviderFault bool
	// Answered: the target answered (even if with a refusal or an unusable
	// answer); counts for it in the breaker.
	Answered bool
	// LowersHealth: counts as a failure in the target's health score
	// (its own faults, and answers of bad quality).
	LowersHealth bool
	// Key is what the failure says about the API key the call used.
	Key KeyVerdict
	// MayBeBilled: the call reached the provider and may have been billed
	// without an answer saying how much (a timeout, a call canceled in
	// flight, an answer that was not usable), so a budget keeps what it
	// reserved for the call; after any other failure it releases it.
	MayBeBilled bool
	// Free: the attempt ended for no fault of the step (a duplicate, a
	// refused late outcome, an answer Redis could not take, a worker that
	// does not serve it): it uses none of the step's retries and does not
	// count as a failure.
	Free bool
}

// KeyVerdict is what a failure says about the API key a call used.
type KeyVerdict int

const (
	KeyFine     KeyVerdict = iota // not the key's fault
	KeyCool                       // rate-limited: rest the key, try the next at once
	KeyDisabled                   // quota spent or key refused: disable it until re-enabled
)

// rules is the table, the one list of the classes: a class missing from
// it (a new one a provider error carried) gets the zero Rule's opposite
// of caution: retryable, nobody's fault.
//
// BudgetExceeded is a limit (one that resets when its period ends, or a
// workflow's whole cap, which does not), not a failure: no provider is at fault (no breaker, no health score, no key
// cooling: the call was never sent), and it is not the request's own fault
// either (another target of the route, under another provider's budget,
// may still take it, so the route moves on). It is not retryable: a
// backoff measured in seconds cannot outwait a period of hours, and
// retrying would only spend the step's retries; a step refused by every
// target ends with its route's fallback_text when it has degrade:
// template, else in the dead-letter queue with the budget named, to be
// requeued once the period has reset (a workflow's cap: rerun it with a
// larger one).
var rules = map[Class]Rule{
	OK:            {Answered: true},
	Network:       {Retryable: true, ProviderFault: true, LowersHealth: true},
	Timeout:       {Retryable: true, ProviderFault: true, LowersHealth: true, MayBeBilled: true},
	Server:        {Retryable: true, ProviderFault: true, LowersHealth: true},
	RateLimited:   {Retryable: true, Key: KeyCool},
	Quota:         {Retryable: true, Key: KeyDisabled},
	Auth:          {Retryable: true, Key: KeyDisabled},
	NotFound:      {Retryable: true},
	Canceled:      {Retryable: true, MayBeBilled: true},
	BadRequest:    {RequestFault: true, Answered: true},
	ContextLength: {RequestFault: true, Answered: true},
	ContentFilter: {RequestFault: true, Answered: true},
	InvalidOutput: {Answered: true, LowersHealth: true, MayBeBilled: true},
	// billed in full, and no retry makes the same model answer shorter
	OutputTooLarge: {Answered: true, MayBeBilled: true},
	Handler:        {Retryable: true},
	// see the comment above: a limit that resets, nobody's fault
	BudgetExceeded: {},
	// a bound of the configuration: no retry makes room under it, and no
	// provider is at fault
	Limit: {},
	// the worker's own
	Panic:        {Retryable: true},
	LeaseExpired: {Retryable: true},
	Busy:         {Retryable: true, Free: true},
	Stale:        {Retryable: true, Free: true},
	Unrecorded:   {Retryable: true, Free: true},
	Unconfirmed:  {Retryable: true, Free: true},
	Unready:      {Retryable: true, Free: true},
	NotServed:    {Retryable: true, Free: true},
	Archived:     {Retryable: true},
	Missing:      {Retryable: true},
	Unsettled:    {Retryable: true},
}

// Classes lists every class of the table, sorted.
func Classes() []Class {
	out := make([]Class, 0, len(rules))
	for c := range rules {
		out = append(out, c)
	}
	slices.Sort(out)
	return out
}

// classified is an error that knows its class (an adapter's *llmclient.Error,
// the router's errors).
type classified interface {
	Class() Class
}

// ClassOf classifies any error: one that knows its class (a Class method) has
// it; a passed deadline is a timeout and a cancellation canceled; any
// other error is a network failure (what a call that got no answer met).
func ClassOf(err error) Class {
	if err == nil {
		return OK
	}
	var c classified
	if errors.As(err, &c) {
		return c.Class()
	}
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return Timeout
	case errors.Is(err, context.Canceled):
		return Canceled
	}
	return Network
}

// Rule returns the class's rule.
func (c Class) Rule() Rule {
	if r, ok := rules[c]; ok {
		return r
	}
	return Rule{Retryable: true}
}

// Retryable reports whether a failure of this class may succeed if the same
// step is tried again later (possibly elsewhere).
func (c Class) Retryable() bool { return c.Rule().Retryable }

// ProviderFault reports whether the failure counts against the target's
// health (breaker, score): canceled calls and key-level problems do not.
func (c Class) ProviderFault() bool { return c.Rule().ProviderFault }

// RequestFault reports whether the request itself is at fault (bad_request,
// context_length, content_filter).
func (c Class) RequestFault() bool { return c.Rule().RequestFault }
