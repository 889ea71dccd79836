package dashboard_test

import (
	"bufio"
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/hibiken/asynq"

	"github.com/agentq/agentq/internal/dashboard"
)

// A blocked workflow's event stream stays open after its history (a
// requeue continues it), with keep-alive comments while nothing happens,
// and ends when the dashboard shuts down; a bad Last-Event-ID is refused
// on one line; reads need the token, as every read does.
func TestABlockedWorkflowsStreamStaysOpenUntilShutdown(t *testing.T) {
	e, _, id := blocked(t)
	srv, err := dashboard.New(t.Context(), dashboard.Options{Config: e.Config, Redis: e.Redis, Token: token, KeepAlive: 50 * time.Millisecond,
		Logger: slog.New(slog.DiscardHandler), AsynqOpt: asynq.RedisClientOpt{Addr: e.DB.Addr, DB: e.DB.DB}})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv)
	t.Cleanup(func() { hs.Close(); srv.Close() })
	get := func(bearer, lastID string) *http.Response {
		t.Helper()
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
		t.Cleanup(cancel)
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, hs.URL+"/api/v1/workflows/"+id+"/events", nil)
		if bearer != "" {
			req.Header.Set("Authorization", "Bearer "+bearer)
		}
		if lastID != "" {
			req.Header.Set("Last-Event-ID", lastID)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	if r := get("", ""); r.StatusCode != http.StatusUnauthorized {
		t.Fatalf("without the token: %d", r.StatusCode)
	}
	if r := get(token, "nonsense"); r.StatusCode != http.StatusBadRequest {
		t.Fatalf("a bad Last-Event-ID: %d", r.StatusCode)
	}
	r := get(token, "")
	defer r.Body.Close()
	sc := bufio.NewScanner(r.Body)
	var seen []string
	keepAlives := 0
	for keepAlives < 3 && sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "event: "):
			seen = append(seen, strings.TrimPrefix(line, "event: "))
		case line == ": keep-alive":
			keepAlives++
		}
	}
	if want := "workflow.submitted step.ready step.started llm.call step.dead"; strings.Join(seen, " ") != want {
		t.Fatalf("events %q, want %q, then keep-alives", seen, want)
	}
	srv.StopStreams()
	for sc.Scan() {
		if line := sc.Text(); strings.HasPrefix(line, "event: ") {
			t.Fatalf("after the shutdown the stream said %q", line)
		}
	}
}
