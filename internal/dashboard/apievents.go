package dashboard

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/agentq/agentq/internal/record"
)

// apiEvents streams a workflow's event log as Server-Sent Events
// (GET /api/v1/workflows/{id}/events): the history first, then events as
// they are logged. Each event is "id:" its id (record.EventID), "event:" its
// type and "data:" the event as JSON. A reader resumes with
// Last-Event-ID (or ?after=ID). The stream ends after the workflow ends
// (its workflow.ended event) with "event: end"; a blocked or waiting
// workflow's stays open. A failure mid-stream is "event: error" with
// {"error": …}, and the stream ends.
func (s *Server) apiEvents(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	after := r.Header.Get("Last-Event-ID")
	if after == "" {
		after = r.URL.Query().Get("after")
	}
	if _, err := s.client.Status(r.Context(), id); err != nil {
		apiError(w, err)
		return
	}
	if after != "" && !record.ValidEventID(after) {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": fmt.Sprintf("Last-Event-ID %.80q is not an event id (ms-seq)", after)})
		return
	}
	fl, _ := w.(http.Flusher)
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no") // nginx: do not buffer the stream
	w.WriteHeader(http.StatusOK)
	send := func(format string, a ...any) bool {
		if _, err := fmt.Fprintf(w, format, a...); err != nil {
			return false
		}
		if fl != nil {
			fl.Flush()
		}
		return true
	}
	if !send("retry: 2000\n\n") {
		return
	}
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	stop := context.AfterFunc(s.streams, cancel) // the server shuts down: the stream ends (a reader resumes elsewhere)
	defer stop()
	type item struct {
		e   record.Event
		err error
	}
	items := make(chan item)
	go func() {
		defer close(items)
		for e, err := range s.client.Events(ctx, id, after) {
			select {
			case items <- item{e, err}:
			case <-ctx.Done():
				return
			}
			if err != nil {
				return
			}
		}
	}()
	tick := time.NewTicker(cmp.Or(s.o.KeepAlive, 15*time.Second))
	defer tick.Stop()
	for {
		select {
		case it, ok := <-items:
			switch {
			case ctx.Err() != nil:
				return // the reader left, or the server shuts down: not the end (a reader resumes)
			case !ok:
				send("event: end\ndata: {}\n\n")
				return
			case it.err != nil:
				b, _ := json.Marshal(map[string]string{"error": it.err.Error()})
				send("event: error\ndata: %s\n\n", b)
				return
			}
			b, _ := json.Marshal(it.e)
			head := ""
			if it.e.ID != "" {
				head = "id: " + it.e.ID + "\n"
			}
			if !send("%sevent: %s\ndata: %s\n\n", head, it.e.Type, b) {
				return
			}
		case <-tick.C:
			if !send(": keep-alive\n\n") {
				return
			}
		case <-ctx.Done():
			return
		}
	}
}
