package dashboard

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/agentq/agentq/internal/flow"
	"github.com/agentq/agentq/internal/producer"
	"github.com/agentq/agentq/internal/record"
)

// streamWriteTimeout is how long one write to an event stream may take
// (Options.StreamWriteTimeout): a client that stops reading is dropped
// then, and its slot freed.
const streamWriteTimeout = 10 * time.Second

// apiEvents streams a workflow's event log as Server-Sent Events
// (GET /api/v1/workflows/{id}/events): the history first, then events as
// they are logged. Each event is "id:" its id (record.EventID), "event:" its
// type and "data:" the event as JSON. A reader resumes with
// Last-Event-ID (or ?after=ID). The stream ends after the workflow ends
// (its workflow.ended event) with "event: end"; a blocked or waiting
// workflow's stays open. A failure mid-stream is "event: error" with
// {"error": …}, and the stream ends.
//
// A malformed or over-long workflow or event id is 400, never echoed
// whole. Past dashboard.max_streams a stream is 503, past
// dashboard.max_streams_per_client from one address 429 (both with
// Retry-After). New events come from the workflow's topic (streamhub.go),
// shared by its followers; a write that takes longer than the write
// timeout drops the client.
func (s *Server) apiEvents(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if err := checkWorkflowID(id); err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": err.Error(), "code": "bad_id"})
		return
	}
	after, what := r.Header.Get("Last-Event-ID"), "Last-Event-ID"
	if after == "" {
		after, what = r.URL.Query().Get("after"), "after"
	}
	if after != "" {
		if err := checkEventID(what, after); err != nil {
			writeJSON(w, http.StatusBadRequest, map[string]string{"error": err.Error(), "code": "bad_event_id"})
			return
		}
	}
	release, ok := s.caps.acquire(w, clientAddr(r))
	if !ok {
		return
	}
	defer release()
	if _, err := s.feed.State(r.Context(), id); err != nil {
		if errors.Is(err, producer.ErrNotFound) {
			writeJSON(w, http.StatusNotFound, map[string]string{"error": fmt.Sprintf("workflow %s not found", flow.BoundID(id))})
			return
		}
		apiError(w, err)
		return
	}
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no") // nginx: do not buffer the stream
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	stop := context.AfterFunc(s.streams, cancel) // the server shuts down: the stream ends (a reader resumes elsewhere)
	defer stop()
	out := &sse{w: w, rc: http.NewResponseController(w), timeout: cmp.Or(s.o.StreamWriteTimeout, streamWriteTimeout)}
	w.WriteHeader(http.StatusOK)
	if !out.send("retry: 2000\n\n") {
		return
	}
	f := s.hub.join(id)
	defer s.hub.leave(f)
	tick := time.NewTicker(cmp.Or(s.o.KeepAlive, 15*time.Second))
	defer tick.Stop()
	last := after
	// what the stream writes, read or handed to it, is written by a
	// goroutine of its own: the deep calls of a read and a write grow
	// that goroutine's stack, not the one that waits (most streams wait
	// most of the time, thousands of them)
	for {
		if ended := shallow(func() bool { return s.writeOn(ctx, out, f, id, &last) }); ended {
			return
		}
		select {
		case <-f.wake:
		case <-tick.C:
			if !out.send(": keep-alive\n\n") {
				return
			}
		case <-ctx.Done():
			return // the reader left, or the server shuts down: not the end (a reader resumes)
		}
	}
}

// shallow runs fn on a goroutine of its own and returns what it did.
func shallow(fn func() bool) bool {
	done := make(chan bool, 1)
	go func() { done <- fn() }()
	return <-done
}

// writeOn writes what f holds (reading the log itself when it is
// behind); true: the stream is over (its workflow ended, or the client
// left).
func (s *Server) writeOn(ctx context.Context, out *sse, f *follower, id string, last *string) bool {
	batches, behind, over, failed := f.take()
	if behind {
		done, ok := s.catchUp(ctx, out, id, last)
		if !ok || done {
			return true
		}
		f.caughtUp(*last)
	}
	for _, evs := range batches {
		for _, e := range evs {
			if *last != "" && !record.EventIDBefore(*last, e.ID) {
				continue // read already, catching up
			}
			if !out.event(e) {
				return true
			}
			*last = e.ID
			if e.Final() {
				out.send("event: end\ndata: {}\n\n")
				return true
			}
		}
	}
	if failed != nil {
		b, _ := json.Marshal(map[string]string{"error": failed.Error()})
		out.send("event: error\ndata: %s\n\n", b)
		return true
	}
	if over {
		out.send("event: end\ndata: {}\n\n")
		return true
	}
	return false
}

// failed ends a stream whose read failed: said on it as an error event
// (done, ok), unless its client is gone (done, !ok).
func failed(ctx context.Context, out *sse, err error) (done, ok bool) {
	if ctx.Err() != nil {
		return true, false
	}
	b, _ := json.Marshal(map[string]string{"error": err.Error()})
	out.send("event: error\ndata: %s\n\n", b)
	return true, true
}

// catchUp writes workflow id's events after *last up to the log's end,
// read by this stream itself. done: the stream ended (the workflow did,
// or Redis failed: said on the stream); !ok: the client is gone.
func (s *Server) catchUp(ctx context.Context, out *sse, id string, last *string) (done, ok bool) {
	n, final := 0, false
	for e, err := range s.feed.Since(ctx, id, *last) {
		if err != nil {
			return failed(ctx, out, err)
		}
		if !out.event(e) {
			return true, false
		}
		if e.ID != "" {
			*last = e.ID
		}
		n, final = n+1, e.Final()
	}
	if !final && n == 0 {
		// nothing new: the record says whether it is over (a workflow
		// that logs nothing, or a reader resuming after its end); the
		// state and the log change in one script, so a final state's
		// events are all in the log by now
		st, err := s.feed.State(ctx, id)
		if err != nil {
			return failed(ctx, out, err)
		}
		if !record.Terminal(st) {
			return false, true
		}
		return s.catchUpOnce(ctx, out, id, last)
	}
	if final {
		out.send("event: end\ndata: {}\n\n")
		return true, true
	}
	return false, true
}

// catchUpOnce reads what a workflow found over logged since *last (its
// end), then ends the stream.
func (s *Server) catchUpOnce(ctx context.Context, out *sse, id string, last *string) (done, ok bool) {
	for e, err := range s.feed.Since(ctx, id, *last) {
		if err != nil {
			break
		}
		if !out.event(e) {
			return true, false
		}
		if e.ID != "" {
			*last = e.ID
		}
	}
	out.send("event: end\ndata: {}\n\n")
	return true, true
}

// sse writes an event stream, each write within the timeout.
type sse struct {
	w       http.ResponseWriter
	rc      *http.ResponseController
	timeout time.Duration
}

// send writes and flushes; false: the client is gone (or too slow).
func (o *sse) send(format string, a ...any) bool {
	_ = o.rc.SetWriteDeadline(time.Now().Add(o.timeout)) // unsupported: no deadline
	if _, err := fmt.Fprintf(o.w, format, a...); err != nil {
		return false
	}
	return o.rc.Flush() == nil
}

// event writes one event.
func (o *sse) event(e record.Event) bool {
	b, _ := json.Marshal(e)
	head := ""
	if e.ID != "" {
		head = "id: " + e.ID + "\n"
	}
	return o.send("%sevent: %s\ndata: %s\n\n", head, e.Type, b)
}
