package webhook

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/hibiken/asynq"

	"github.com/agentq/agentq/redact"
	"github.com/agentq/agentq/retry"
)

// Options configure a Handler. Secret is required; the zero value of every
// other field is its documented default.
type Options struct {
	// Secret signs every delivery (webhooks.secret): "whsec_" and base64,
	// or raw bytes; at least MinSecretBytes either way.
	Secret string
	// Allow is webhooks.allow (see Guard); empty: any public host.
	Allow []string
	// Timeout bounds one POST, connecting included; 0: 10s.
	Timeout time.Duration
	// MaxResponseBytes is how much of an answer is read; 0: 64 KiB.
	MaxResponseBytes int64
	// Now is the clock of webhook-timestamp; nil: time.Now.
	Now func() time.Time
	// Observe hears each attempt's result, by event: delivered, retrying
	// (it failed and will be retried), dead (it failed on its last try and
	// is archived) or refused (the guard refused it: archived at once);
	// nil: nobody.
	Observe func(event, result string)
	// Logger; nil: discard.
	Logger *slog.Logger
}

// DefaultTimeout bounds one POST when Options.Timeout is 0.
const DefaultTimeout = 10 * time.Second

// Delivery results, as Options.Observe hears them.
const (
	ResultDelivered = "delivered"
	ResultRetrying  = "retrying"
	ResultDead      = "dead"
	ResultRefused   = "refused"
)

// excerptBytes bounds the part of a refusing answer's body kept in the
// error (redacted).
const excerptBytes = 200

// Handler delivers webhook tasks. It is an asynq.Handler.
type Handler struct {
	o      Options
	key    []byte
	guard  *Guard
	client *http.Client
	red    *redact.Redactor
}

// NewHandler returns a Handler; a bad secret or allow entry is an error
// that names it.
func NewHandler(o Options) (*Handler, error) {
	key, err := ParseSecret(o.Secret)
	if err != nil {
		return nil, fmt.Errorf("webhooks.secret: %w", err)
	}
	g, err := NewGuard(o.Allow)
	if err != nil {
		return nil, fmt.Errorf("webhooks.%w", err)
	}
	if o.Timeout <= 0 {
		o.Timeout = DefaultTimeout
	}
	if o.MaxResponseBytes <= 0 {
		o.MaxResponseBytes = 64 << 10
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Observe == nil {
		o.Observe = func(string, string) {}
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return &Handler{o: o, key: key, guard: g, client: g.Client(o.Timeout), red: redact.New(o.Secret, string(key))}, nil
}

// ProcessTask implements asynq.Handler: one attempt of one delivery. A
// non-2xx answer or a network error is returned (asynq retries it, then
// archives it with the reason); a refused destination is archived at once.
func (h *Handler) ProcessTask(ctx context.Context, t *asynq.Task) error {
	var p payload
	if err := json.Unmarshal(t.Payload(), &p); err != nil || p.MsgID == "" || p.URL == "" {
		h.o.Logger.Error("webhook dead-lettered: unreadable payload")
		return fmt.Errorf("unreadable webhook payload: %w", asynq.SkipRetry)
	}
	retried, _ := asynq.GetRetryCount(ctx)
	maxRetry, _ := asynq.GetMaxRetry(ctx)
	log := h.o.Logger.With("wf", p.Workflow, "event", p.Event, "host", hostOf(p.URL), "attempt", retried+1)
	err := h.deliver(ctx, p)
	_, isRefused := refused(err)
	switch {
	case err == nil:
		h.o.Observe(p.Event, ResultDelivered)
		log.Info("webhook delivered")
		return nil
	case isRefused:
		h.o.Observe(p.Event, ResultRefused)
		log.Error("webhook dead-lettered: destination refused", "err", err, "alert", true)
		return fmt.Errorf("%w: %w", err, asynq.SkipRetry)
	case retried >= maxRetry:
		h.o.Observe(p.Event, ResultDead)
		log.Error("webhook dead-lettered after its retries", "err", err, "alert", true)
	default:
		h.o.Observe(p.Event, ResultRetrying)
		log.Warn("webhook delivery failed; will retry", "err", err)
	}
	return err
}

// deliver posts the body once, signed now.
func (h *Handler) deliver(ctx context.Context, p payload) error {
	if CheckURL(p.URL) != nil {
		return &RefusedError{Host: hostOf(p.URL), Reason: "the URL is not an http(s) URL with a host"}
	}
	u, _ := url.Parse(p.URL)
	if err := h.guard.CheckHost(u.Hostname()); err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, p.URL, bytes.NewReader(p.Body))
	if err != nil {
		return &RefusedError{Host: u.Host, Reason: "cannot build the request"}
	}
	ts := h.o.Now().Unix()
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "agentq-webhook/1")
	req.Header.Set(HeaderID, p.MsgID)
	req.Header.Set(HeaderTimestamp, fmt.Sprint(ts))
	req.Header.Set(HeaderSignature, Sign(h.key, p.MsgID, ts, p.Body))
	resp, err := h.client.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // without the URL, which may carry a token
		}
		if re, ok := refused(err); ok {
			return re
		}
		return fmt.Errorf("POST to %s: %s", u.Host, h.red.Truncate(err.Error(), 512))
	}
	defer resp.Body.Close()
	head, _ := io.ReadAll(io.LimitReader(resp.Body, excerptBytes))
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, h.o.MaxResponseBytes-int64(len(head))))
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		return nil
	}
	msg := fmt.Sprintf("%s answered %d", u.Host, resp.StatusCode)
	if ex := strings.Join(strings.Fields(strings.ToValidUTF8(string(head), "")), " "); ex != "" {
		msg += ": " + h.red.Truncate(ex, excerptBytes)
	}
	return errors.New(msg)
}

// hostOf is a URL's host, for logs and errors (never the URL: its path or
// query may carry a token).
func hostOf(s string) string {
	u, err := url.Parse(s)
	if err != nil || u.Host == "" {
		return "(bad URL)"
	}
	return u.Host
}

// DefaultBackoff is the wait between delivery attempts: 10s × 3^n, at most
// 6h, jitter [0.8, 1.2): DefaultMaxRetry retries span about nine hours.
var DefaultBackoff = retry.Backoff{Base: 10 * time.Second, Factor: 3, Max: 6 * time.Hour, JitterLow: 0.8, JitterHigh: 1.2}

// RetryDelay is a server's asynq.RetryDelayFunc: deliveries wait
// b.Delay(n, random), every other task what next says.
func RetryDelay(b retry.Backoff, random func() float64, next asynq.RetryDelayFunc) asynq.RetryDelayFunc {
	return func(n int, err error, t *asynq.Task) time.Duration {
		if t.Type() == TypeDelivery {
			return b.Delay(n, random)
		}
		return next(n, err, t)
	}
}
