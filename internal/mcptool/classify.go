package mcptool

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentq/agentq/retry"
)

// A server's failures, by class (retry.ClassOf reads them): unreachable
// (it could not be started or reached, or the connection was lost: the
// step is retried), a timeout (retried), a protocol error (the server
// answered with a JSON-RPC error or with what MCP does not allow: not
// retried), a message over the bound (not retried).

// unreachable is a server that could not be started or reached, or whose
// connection was lost during the call.
type unreachable struct {
	server, msg string
	cause       error
}

func (e *unreachable) Error() string {
	return fmt.Sprintf("MCP server %s is unreachable: %s", e.server, e.msg)
}
func (e *unreachable) Unwrap() error      { return e.cause }
func (e *unreachable) Class() retry.Class { return retry.Network }

// timedOut is a call that got no answer in time: within the server's
// timeout, or before the step's time ran out.
type timedOut struct {
	server, method string
	timeout        time.Duration
}

func (e *timedOut) Error() string {
	return fmt.Sprintf("MCP server %s: %s got no answer in time (its timeout is %s)", e.server, e.method, e.timeout)
}
func (e *timedOut) Unwrap() error      { return context.DeadlineExceeded }
func (e *timedOut) Class() retry.Class { return retry.Timeout }

// protocolError is a server's answer that breaks MCP's rules, or a
// JSON-RPC error it answered with.
type protocolError struct{ server, msg string }

func (e *protocolError) Error() string {
	return fmt.Sprintf("MCP server %s: protocol error: %s", e.server, e.msg)
}
func (e *protocolError) Class() retry.Class { return retry.BadRequest }

// tooLarge is a server's message over the bound.
type tooLarge struct{ server, msg string }

func (e *tooLarge) Error() string      { return fmt.Sprintf("MCP server %s: %s", e.server, e.msg) }
func (e *tooLarge) Unwrap() error      { return errFrameTooLarge }
func (e *tooLarge) Class() retry.Class { return retry.BadRequest }

// The SDK's own codes for a connection that closed (jsonrpc2's client and
// server closing, a request the transport refused).
var closingCodes = map[int64]bool{-32003: true, -32004: true, -32005: true}

// classify is err, a call's failure, as one of the classes above; a
// canceled ctx's error stays as it is (class canceled). c is the
// connection the call went over (nil: none yet).
func (s *server) classify(ctx context.Context, method string, err error, c *conn) error {
	server := s.name
	var (
		u  *unreachable
		t  *timedOut
		p  *protocolError
		tl *tooLarge
		we *jsonrpc.Error
	)
	switch {
	case errors.As(err, &u), errors.As(err, &t), errors.As(err, &p), errors.As(err, &tl):
		return err
	case c != nil && c.frames.exceeded():
		return &tooLarge{server: server, msg: c.frames.error().Error()}
	case errors.Is(ctx.Err(), context.Canceled):
		return ctx.Err()
	case ctx.Err() != nil, errors.Is(err, context.DeadlineExceeded):
		return &timedOut{server: server, method: method, timeout: s.cfg.Timeout.D()}
	case errors.As(err, &we) && !closingCodes[we.Code]:
		return &protocolError{server: server, msg: fmt.Sprintf("%s answered error %d: %s", method, we.Code, we.Message)}
	case isDecodeError(err):
		return &protocolError{server: server, msg: fmt.Sprintf("%s answered what MCP does not allow: %v", method, err)}
	case errors.Is(err, mcp.ErrConnectionClosed), errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF), errors.As(err, &we):
		msg := "the connection closed during " + method
		if c != nil && !c.alive() {
			msg += " (" + c.why() + ")"
		}
		return &unreachable{server: server, msg: msg, cause: err}
	}
	return &unreachable{server: server, msg: method + ": " + err.Error(), cause: err}
}

// isDecodeError reports whether err is an answer that does not decode as
// the result MCP says.
func isDecodeError(err error) bool {
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	return errors.As(err, &se) || errors.As(err, &te)
}

func isUnreachable(err error) bool { var u *unreachable; return errors.As(err, &u) }
func isTimeout(err error) bool     { var t *timedOut; return errors.As(err, &t) }
func isTooLarge(err error) bool    { var t *tooLarge; return errors.As(err, &t) }

// outcomeOf is a failed call's outcome label (metrics, spans).
func outcomeOf(err error) string {
	var p *protocolError
	switch {
	case isUnreachable(err):
		return "unreachable"
	case isTimeout(err):
		return "timeout"
	case isTooLarge(err):
		return "too_large"
	case errors.As(err, &p):
		return "protocol_error"
	case errors.Is(err, context.Canceled):
		return "canceled"
	}
	return "error"
}

func isProtocol(err error) bool { var p *protocolError; return errors.As(err, &p) }
