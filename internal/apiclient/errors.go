package apiclient

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"

	"github.com/agentq/agentq/internal/flow"
	"github.com/agentq/agentq/internal/producer"
	"github.com/agentq/agentq/internal/record"
	"github.com/agentq/agentq/internal/spec"
)

// The API's "code"s: no live worker is alive; an idempotency key names a
// workflow with another spec or input; a key that cannot be one.
const (
	codeNoWorkers           = "no_workers"
	codeIdempotencyConflict = "idempotency_conflict"
	codeBadIdempotencyKey   = "bad_idempotency_key"
	codeBadSignal           = "bad_signal"
	codeUnavailable         = "unavailable"   // the dashboard's Redis did not answer
	codeNotConfirmed        = "not_confirmed" // written to the primary, not confirmed by the replicas
	codeNotAMap             = "not_a_map"
	codeUnknownState        = "unknown_state"
)

// The API's codes for a signal's bounds: data over limits.max_signal_bytes
// (413), a bound of limits: reached (429: limits.max_kept_signals).
const (
	codeSignalTooLarge = "signal_too_large"
	codeOverLimit      = "over_limit"
)

// unreachableError is a dashboard that did not answer: the caller treats
// it as Redis not answering (flow.ErrUnavailable: wait, and try again),
// but for a change that may have been made before the answer was lost
// (mayHaveRun: a submit tried again could run twice, unless it has an
// idempotency key).
type unreachableError struct {
	base       string
	err        error
	mayHaveRun bool
}

func (e *unreachableError) Error() string {
	if e.mayHaveRun {
		return fmt.Sprintf("%v at %s (the change may have been made): %v", ErrUnreachable, e.base, e.err)
	}
	return fmt.Sprintf("%v at %s: %v", ErrUnreachable, e.base, e.err)
}

func (e *unreachableError) Unwrap() []error {
	if e.mayHaveRun {
		return []error{ErrUnreachable, e.err}
	}
	return []error{ErrUnreachable, flow.ErrUnavailable, e.err}
}

// notSent reports a request that never reached the server: its
// connection was not made.
func notSent(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}

// errNoAnswer is decodeError's answer to a proxy's 502, 503 or 504 that
// carries no answer of the dashboard's.
var errNoAnswer = errors.New("no answer from the dashboard")

// redactedURL is base without a password it may hold.
func redactedURL(base string) string {
	if u, err := url.Parse(base); err == nil {
		return u.Redacted()
	}
	return "the dashboard"
}

// decodeError turns the dashboard API's error answer (status and body)
// to method path into the error the engine's client returns for the same
// cause, so a caller branches on it with errors.Is alike over Redis or
// over HTTP.
func decodeError(method, path string, status int, data []byte) error {
	var e struct {
		Error    string   `json:"error"`
		Code     string   `json:"code"`
		Problems []string `json:"problems"`
		Details  []struct {
			Where   string `json:"where"`
			Message string `json:"message"`
		} `json:"details"`
	}
	if json.Unmarshal(data, &e) != nil && (status == http.StatusBadGateway || status == http.StatusServiceUnavailable || status == http.StatusGatewayTimeout) {
		return errNoAnswer
	}
	msg := e.Error
	if msg == "" {
		msg = strings.TrimSpace(string(data))
	}
	if status == http.StatusBadRequest && len(e.Details) > 0 {
		// a spec's problems, without the request body's source and
		// lines: the caller puts them on its own file
		errs := make([]error, len(e.Details))
		for i, d := range e.Details {
			errs[i] = &spec.SpecError{Where: d.Where, Msg: d.Message}
		}
		return errors.Join(errs...)
	}
	if status == http.StatusBadRequest && len(e.Problems) > 0 {
		// one error a problem, so each is one line
		errs := make([]error, len(e.Problems))
		for i, p := range e.Problems {
			errs[i] = &problemError{p}
		}
		return errors.Join(errs...)
	}
	if len(e.Problems) > 0 {
		msg += ": " + strings.Join(e.Problems, "; ")
	}
	err := fmt.Errorf("%s %s: %d %s", method, path, status, msg)
	switch {
	case e.Code == codeUnavailable:
		return &serverError{msg: msg, is: flow.ErrUnavailable}
	case e.Code == codeNotConfirmed:
		return &serverError{msg: msg, is: producer.ErrNotConfirmed}
	case e.Code == codeNotAMap:
		return &serverError{msg: msg, is: producer.ErrNotAMap}
	case e.Code == codeUnknownState:
		return &serverError{msg: msg, is: producer.ErrUnknownState}
	case e.Code == codeNoWorkers:
		return fmt.Errorf("%w: %v", producer.ErrNoWorkers, err)
	case status == http.StatusConflict && e.Code == codeIdempotencyConflict:
		return &serverError{msg: msg, is: producer.ErrIdempotencyConflict}
	case e.Code == "no_spec":
		return fmt.Errorf("%w: %v", producer.ErrNoSpec, err)
	case e.Code == "bad_spec_name":
		return &serverError{msg: msg, is: producer.ErrBadSpecName}
	case e.Code == codeSignalTooLarge:
		return &serverError{msg: msg, is: producer.ErrSignalTooLarge}
	case e.Code == codeOverLimit:
		return &serverError{msg: msg, is: producer.ErrOverLimit}
	case e.Code == codeBadSignal:
		return &serverError{msg: msg, is: producer.ErrBadSignal}
	case e.Code == codeBadIdempotencyKey:
		return &serverError{msg: msg, is: producer.ErrBadIdempotencyKey}
	case status == http.StatusConflict && e.Code == "not_waiting":
		return &serverError{msg: msg, is: flow.ErrNotWaiting}
	case status == http.StatusConflict && e.Code == "not_finished":
		return &serverError{msg: msg, is: producer.ErrNotFinished}
	case strings.HasPrefix(path, "/api/v1/queues/") && status == http.StatusNotFound:
		return &serverError{msg: msg, is: producer.ErrUnknownQueue}
	case strings.HasPrefix(path, "/api/v1/dlq") && status == http.StatusBadRequest:
		return &serverError{msg: msg, is: producer.ErrUnknownClass}
	case strings.HasPrefix(path, "/api/v1/keys") && (status == http.StatusNotFound || status == http.StatusBadRequest):
		return fmt.Errorf("%w: %v", record.ErrUnknownKey, err)
	}
	switch status {
	case http.StatusNotFound:
		if strings.HasPrefix(path, "/api/v1/dlq/") {
			return fmt.Errorf("%w: %v", producer.ErrNoDeadLetter, err)
		}
		return fmt.Errorf("%w: %v", producer.ErrNotFound, err)
	case http.StatusBadRequest:
		return fmt.Errorf("%w: %v", spec.ErrInvalidSpec, err)
	case http.StatusUnauthorized, http.StatusForbidden:
		return fmt.Errorf("%w: %v", ErrUnauthorized, err)
	}
	return err
}

// serverError is the server's one-line error, an is.
type serverError struct {
	msg string
	is  error
}

func (e *serverError) Error() string { return e.msg }
func (e *serverError) Unwrap() error { return e.is }

// problemError is one problem with a spec, as the server reported it.
type problemError struct{ msg string }

func (e *problemError) Error() string { return e.msg }
func (e *problemError) Unwrap() error { return spec.ErrInvalidSpec }
