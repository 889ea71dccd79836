package apiclient

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/agentq/agentq/internal/flow"
	"github.com/agentq/agentq/internal/record"
)

// maxEventLine bounds one line of an event stream: an event's data is
// bounded by the server (its text fields by the log), so a longer line
// is not an agentq dashboard's.
const maxEventLine = 1 << 20

// eventRetries is how many times in a row a dropped event stream is
// reconnected (from the last event read) before the error is returned.
const eventRetries = 5

// Events follows a workflow's event log over the dashboard's event
// stream (GET /api/v1/workflows/{id}/events), as producer.Client.Events
// does over Redis: a stream that drops is reconnected from the last event
// read (Last-Event-ID), so every event comes once. When the dashboard
// stays away (or its streams keep closing before the end) the error is
// ErrUnreachable (and flow.ErrUnavailable), as when the dashboard's
// Redis does not answer: a caller may resume after the last event read.
func (c *Client) Events(ctx context.Context, id, after string) iter.Seq2[record.Event, error] {
	return func(yield func(record.Event, error) bool) {
		failures := 0
		for {
			ended, last, err := c.followOnce(ctx, id, after, yield)
			if last != after {
				after, failures = last, 0
			}
			switch {
			case ended:
				return
			case err == nil: // the caller stopped
				return
			case ctx.Err() != nil:
				yield(record.Event{}, ctx.Err())
				return
			}
			var ue *unreachableError
			if failures++; failures > eventRetries || !(errors.As(err, &ue) || errors.Is(err, errDropped)) {
				if errors.Is(err, errDropped) {
					// streams that keep closing before the end: the
					// dashboard is going away (a restart, a proxy)
					err = &unreachableError{base: redactedURL(c.base), err: err}
				}
				yield(record.Event{}, err)
				return
			}
			select {
			case <-ctx.Done():
				yield(record.Event{}, ctx.Err())
				return
			case <-time.After(time.Duration(failures) * 200 * time.Millisecond):
			}
		}
	}
}

// errDropped is a stream that closed before it said it ended.
var errDropped = errors.New("the event stream closed before the workflow ended")

// followOnce reads one connection's events. It returns ended when the
// server said the stream is over, the last event id read, and why it
// stopped otherwise (nil: yield asked to stop).
func (c *Client) followOnce(ctx context.Context, id, after string, yield func(record.Event, error) bool) (ended bool, last string, err error) {
	last = after
	path := "/api/v1/workflows/" + url.PathEscape(id) + "/events"
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.base+path, nil)
	if err != nil {
		return false, last, err
	}
	req.Header.Set("Accept", "text/event-stream")
	if after != "" {
		req.Header.Set("Last-Event-ID", after)
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	// no client timeout: the stream lasts as long as the workflow runs
	// (the server's keep-alives and ctx bound it)
	resp, err := (&http.Client{Transport: c.http.Transport}).Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return false, last, ctx.Err()
		}
		return false, last, &unreachableError{base: redactedURL(c.base), err: err}
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		data, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		if err := decodeError("GET", path, resp.StatusCode, data); !errors.Is(err, errNoAnswer) {
			return false, last, err
		}
		return false, last, &unreachableError{base: redactedURL(c.base), err: fmt.Errorf("GET %s: %d %s", path, resp.StatusCode, http.StatusText(resp.StatusCode))}
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 0, 64<<10), maxEventLine)
	var typ, data string
	for sc.Scan() {
		line := sc.Text()
		if line != "" {
			field, value, _ := strings.Cut(line, ":")
			value = strings.TrimPrefix(value, " ")
			switch field {
			case "event":
				typ = value
			case "data":
				data += value
			}
			continue
		}
		// a blank line ends an event
		t, d := typ, data
		typ, data = "", ""
		switch t {
		case "":
			continue // a comment (keep-alive) or the retry advice
		case "end":
			return true, last, nil
		case "error":
			return false, last, streamError(id, d)
		}
		var e record.Event
		if err := json.Unmarshal([]byte(d), &e); err != nil {
			return false, last, fmt.Errorf("events of workflow %s: event %q: %w", id, t, err)
		}
		if !yield(e, nil) {
			return false, last, nil
		}
		if e.ID != "" {
			last = e.ID
		}
	}
	if ctx.Err() != nil {
		return false, last, ctx.Err()
	}
	if err := sc.Err(); err != nil {
		return false, last, fmt.Errorf("%w: %w", errDropped, err)
	}
	return false, last, errDropped
}

// streamError is the error an event stream's "error" event says: the
// dashboard's Redis not answering is flow.ErrUnavailable, as over Redis
// (the reader may resume after the last event), anything else is the
// server's answer.
func streamError(id, data string) error {
	var e struct {
		Error string `json:"error"`
		Code  string `json:"code"`
	}
	_ = json.Unmarshal([]byte(data), &e)
	msg := e.Error
	if !strings.Contains(msg, id) {
		msg = fmt.Sprintf("events of workflow %s: %s", id, msg)
	}
	if e.Code == codeUnavailable || strings.Contains(e.Error, flow.ErrUnavailable.Error()) {
		return &serverError{msg: msg, is: flow.ErrUnavailable}
	}
	return errors.New(msg)
}
