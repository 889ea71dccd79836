package llmclient

import (
	"context"
	"crypto/x509"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/agentq/agentq/redact"
)

// Options configures an adapter. The zero value of every optional field is
// a working default.
type Options struct {
	Name    string   // provider name, used in errors, fingerprints and metrics
	BaseURL string   // empty: the provider's public endpoint
	Keys    []string // primary first; at least one (a local model takes any string)
	// Transport is the HTTP transport; nil means one shared by the
	// adapters built without one: a copy of http.DefaultTransport (as the
	// program left it before the first adapter of its pool's size) with
	// an idle pool of IdleConnsPerHost connections per host, or the
	// transport the program put in http.DefaultTransport's place, used as
	// it is.
	Transport http.RoundTripper
	// IdleConnsPerHost is how many idle connections to the provider the
	// shared transport keeps for the next calls when Transport is nil:
	// the most calls the program makes to it at once (a worker's
	// concurrency). Below 256, 256 (the zero value too); above 65,536,
	// 65,536. A call that finds no idle connection dials a new one, and
	// over HTTP/1.1 (a local model's plain endpoint) each call in flight
	// holds one; a connection that ends a call with the pool full is
	// closed. An idle HTTP/1.1 connection keeps two goroutines and 2 KiB
	// of buffers (about 14 KiB in all) until it is used again or idle for
	// the transport's IdleConnTimeout (90 s).
	IdleConnsPerHost int
	// RootCAs, when set and Transport is nil, are the certificate
	// authorities the provider's HTTPS endpoint is checked against
	// (instead of the system's): a transport like the shared one, with
	// its own pool of connections, is made for them.
	RootCAs *x509.CertPool
	// Now is the clock used for latency and HTTP-date Retry-After; nil means time.Now.
	Now func() time.Time
	// MaxResponseBytes bounds what is read of one 2xx answer or stream;
	// 0 means DefaultMaxResponseBytes. Error bodies are always cut at 64 KiB.
	MaxResponseBytes int64
	// Redactor removes the process's other secrets (the Redis password,
	// the dashboard token, other providers' keys) from every text the
	// adapter returns; nil removes the adapter's own keys (named by their
	// fingerprints) and key-shaped tokens only, which it always does.
	Redactor *redact.Redactor
}

func (o Options) validate() error {
	if o.Name == "" {
		return errors.New("llmclient: provider name is empty")
	}
	if len(o.Keys) == 0 {
		return errors.New("llmclient: provider " + o.Name + " has no keys")
	}
	if o.MaxResponseBytes < 0 {
		return errors.New("llmclient: provider " + o.Name + ": max response bytes is negative")
	}
	if o.IdleConnsPerHost < 0 {
		return errors.New("llmclient: provider " + o.Name + ": idle connections per host is negative")
	}
	return nil
}

type keyCtx struct{}

// WithKey makes calls under ctx use the idx-th (0-based) key of whichever
// provider they reach; an index past the provider's keys wraps around. The
// key pool uses it to rotate keys; without it the primary key is used.
func WithKey(ctx context.Context, idx int) context.Context {
	return context.WithValue(ctx, keyCtx{}, idx)
}

// base is what both adapters share: key fingerprints, the redactor, the
// clock, and the translation of SDK errors into *Error.
type base struct {
	name      string
	genAI     string // its dialect's gen_ai.provider.name (NewProvider sets it)
	fps       []string
	ids       []string
	red       *redact.Redactor
	now       func() time.Time
	maxAnswer int64
}

func newBase(o Options) base {
	b := base{name: o.Name, now: o.Now, red: o.Redactor, maxAnswer: o.MaxResponseBytes}
	if b.now == nil {
		b.now = time.Now
	}
	if b.maxAnswer == 0 {
		b.maxAnswer = DefaultMaxResponseBytes
	}
	for i, k := range o.Keys {
		b.fps = append(b.fps, Fingerprint(o.Name, i, k))
		b.ids = append(b.ids, KeyID(k))
		b.red = b.red.With(b.fps[i], k) // an echoed key reads as its fingerprint
	}
	if b.red == nil {
		b.red = redact.New()
	}
	return b
}

func (b *base) Name() string { return b.name }

func (b *base) setGenAI(name string) { b.genAI = name }
func (b *base) genAIName() string    { return b.genAI }

// KeyFingerprints names the provider's keys in order.
func (b *base) KeyFingerprints() []string { return append([]string(nil), b.fps...) }

// KeyIDs identifies the provider's keys in shared state, in order. It is
// on every call's path, so it returns the adapter's own slice: read only.
func (b *base) KeyIDs() []string { return b.ids }

func (b *base) keyIndex(ctx context.Context) int {
	i, _ := ctx.Value(keyCtx{}).(int)
	if i < 0 {
		i = 0
	}
	return i % len(b.fps)
}

// sdkError is what an adapter learned from its SDK's error value.
type sdkError struct {
	status             int
	code, typ, message string
	requestID, rawBody string
	inStream           bool
}

// toError builds the common *Error from an SDK error plus the captured
// response. parse extracts SDK-specific fields.
func (b *base) toError(ctx context.Context, model string, key int, c *capture, err error, parse func(error) sdkError) *Error {
	e := &Error{Provider: b.name, Model: model, Key: b.fps[key], Err: err}
	s := parse(err)
	status, header, body := 0, http.Header(nil), ""
	if c != nil {
		status, header, body = c.snapshot()
	}
	if s.status == 0 && status >= 400 {
		s.status = status
	}
	e.Status = s.status
	e.Code, e.Type, e.Message, e.RequestID = s.code, s.typ, s.message, s.requestID
	e.InStream = s.inStream || (status > 0 && status < 400)
	if body == "" {
		body = s.rawBody
	}
	if e.Code == "" && e.Type == "" && body != "" {
		e.Code, e.Type, e.Message = parseErrorBody([]byte(body))
	}
	var syn *json.SyntaxError
	if status >= 200 && status < 300 && e.Type == "" && (errors.As(err, &syn) || errors.Is(err, io.ErrUnexpectedEOF) ||
		strings.Contains(err.Error(), "unexpected end of JSON input")) {
		e.Type = TypeMalformed // a 200 whose body is not a usable answer
	}
	if header != nil {
		e.RetryAfter = parseRetryAfter(header, b.now())
		if e.RequestID == "" {
			e.RequestID = requestID(header)
		}
	}
	if c != nil && c.overLimit() {
		e.Type, e.InStream = TypeTooLarge, true
	} else if errors.Is(err, errEmptyAnswer) {
		e.Type = TypeEmpty
	}
	b.redactError(e, body)
	var ne net.Error
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, ErrStreamStalled) || (errors.As(err, &ne) && ne.Timeout()) {
		e.Timeout = true
	}
	if errors.Is(err, ErrStreamStalled) || errors.Is(err, ErrStreamTruncated) {
		e.InStream = true
	}
	if ctx.Err() == context.DeadlineExceeded {
		e.Timeout = true
	}
	return e
}

// errTextLimit bounds the text of the SDK error an *Error wraps.
const errTextLimit = 2 << 10

// redactError is the one place where provider text enters an *Error: every
// field a provider (or anything between it and us) could have written is
// cut and has every configured secret and key-shaped token removed, and the
// SDK's error, whose text may embed the raw body, prints redacted too.
func (b *base) redactError(e *Error, body string) {
	e.Body = b.red.Truncate(body, bodyExcerptLimit)
	e.Message = b.red.Truncate(e.Message, bodyExcerptLimit)
	e.Code = b.red.Truncate(e.Code, 128)
	e.Type = b.red.Truncate(e.Type, 128)
	e.RequestID = b.red.Truncate(e.RequestID, 128)
	if e.Err != nil {
		e.Err = &redactedError{text: b.red.Truncate(e.Err.Error(), errTextLimit), err: e.Err}
	}
}

// redactedError prints a redacted text for an error whose own text may hold
// a secret; errors.Is and errors.As still see the original.
type redactedError struct {
	text string
	err  error
}

func (e *redactedError) Error() string { return e.text }
func (e *redactedError) Unwrap() error { return e.err }

// parseErrorBody reads the {"error": {"type", "code", "message"}} shape both
// providers use (Anthropic: {"type":"error","error":{"type","message"}}).
func parseErrorBody(body []byte) (code, typ, message string) {
	var env struct {
		Error json.RawMessage `json:"error"`
	}
	if json.Unmarshal(body, &env) != nil || len(env.Error) == 0 {
		return "", "", ""
	}
	var inner struct {
		Code    any    `json:"code"`
		Type    string `json:"type"`
		Message string `json:"message"`
		Details struct {
			ErrorCode string `json:"error_code"`
		} `json:"details"`
	}
	if json.Unmarshal(env.Error, &inner) != nil {
		var s string
		if json.Unmarshal(env.Error, &s) == nil {
			return "", "", s
		}
		return "", "", ""
	}
	code = codeString(inner.Code)
	if code == "" {
		code = inner.Details.ErrorCode
	}
	return code, inner.Type, inner.Message
}

func codeString(c any) string {
	switch v := c.(type) {
	case nil:
		return ""
	case string:
		return v
	case int:
		if v == 0 { // go-openai turns "code": null into 0
			return ""
		}
		return strconv.Itoa(v)
	case float64:
		return strconv.FormatFloat(v, 'f', -1, 64)
	default:
		b, _ := json.Marshal(v)
		return string(b)
	}
}
