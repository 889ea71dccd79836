package llmclient

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/agentq/agentq/retry"
)

// Error is the one error type every adapter returns for a failed call. It
// carries what a classifier needs (status, provider code and type, whether
// the call timed out or broke mid-body) and what a person needs to read a log
// line (request id, a short body excerpt). It never carries an API key: the
// key is named by its fingerprint and scrubbed from the excerpt.
type Error struct {
	Provider string
	Model    string
	Key      string // fingerprint of the key used, e.g. "openai#2 (…f3a9)"

	Status    int    // HTTP status; 0 when no response arrived
	Code      string // provider error code, e.g. "insufficient_quota"
	Type      string // provider error type, e.g. "rate_limit_error"
	Message   string // provider's message
	RequestID string
	Body      string // first bytes of the error body, key-scrubbed

	// RetryAfter is what the provider asked us to wait (Retry-After in
	// seconds or as an HTTP date, or retry-after-ms); zero when absent.
	RetryAfter time.Duration

	Timeout  bool // the call's deadline passed, or a stream stalled
	InStream bool // the error arrived inside a 200 stream, or the body was cut
	Err      error
}

// TypeMalformed is the Error.Type of a 200 answer whose body could not be
// read as one (the classifier counts it as a server failure).
const TypeMalformed = "malformed_response"

// TypeTooLarge is the Error.Type of a 2xx answer longer than the adapter's
// MaxResponseBytes (class server, like a malformed answer).
const TypeTooLarge = "response_too_large"

// TypeEmpty is the Error.Type of a 2xx answer with nothing in it: no
// choices (OpenAI), no content blocks (Anthropic), or neither text nor tool
// calls. Both dialects treat it alike: class server, so the next target or
// a later retry is tried.
const TypeEmpty = "empty_response"

// errEmptyAnswer is what an adapter reports for an empty answer.
var errEmptyAnswer = errors.New("the answer is empty: no text and no tool calls")

// ErrStreamTruncated marks a stream that ended without its final event.
var ErrStreamTruncated = errors.New("stream ended before its final event")

// ErrStreamStalled marks a stream that sent nothing for StallTimeout.
var ErrStreamStalled = errors.New("stream stalled")

func (e *Error) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s/%s", e.Provider, e.Model)
	if e.Key != "" {
		fmt.Fprintf(&b, " key %s", e.Key)
	}
	switch {
	case e.Status != 0:
		fmt.Fprintf(&b, ": status %d", e.Status)
	case e.Timeout:
		b.WriteString(": timeout")
	}
	if e.InStream {
		b.WriteString(" (in stream)")
	}
	if e.Type != "" {
		fmt.Fprintf(&b, " type=%s", e.Type)
	}
	if e.Code != "" {
		fmt.Fprintf(&b, " code=%s", e.Code)
	}
	if e.Message != "" {
		fmt.Fprintf(&b, ": %s", e.Message)
	} else if e.Err != nil {
		fmt.Fprintf(&b, ": %v", e.Err)
	} else if e.Body != "" {
		fmt.Fprintf(&b, ": body %q", e.Body)
	}
	if e.RetryAfter > 0 {
		fmt.Fprintf(&b, " (retry after %s)", e.RetryAfter)
	}
	if e.RequestID != "" {
		fmt.Fprintf(&b, " [request %s]", e.RequestID)
	}
	return b.String()
}

func (e *Error) Unwrap() error { return e.Err }

// AsError returns the *Error in err's chain, if any.
func AsError(err error) (*Error, bool) {
	var e *Error
	ok := errors.As(err, &e)
	return e, ok
}

// Class classifies the failure (docs/failures.md).
func (e *Error) Class() retry.Class {
	return retry.Classify(retry.Failure{
		Status:   e.Status,
		Code:     e.Code,
		Type:     e.Type,
		Message:  e.Message,
		Body:     e.Body,
		Timeout:  e.Timeout,
		Canceled: errors.Is(e.Err, context.Canceled) && !e.Timeout,
		InStream: e.InStream,
	})
}
