package chaosllm

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentq/agentq/internal/poll"
)

// Requests held open count towards peak_in_flight, tool requests too; a
// reset clears the peak and the tool turns.
func TestPeakInFlightAndResetWithToolTurns(t *testing.T) {
	srv, _ := New(Scenario{Phases: []Phase{{Requests: 1}, {Fault: &Fault{Kind: KindHang}}}}, Options{})
	hs := httptest.NewServer(srv)
	defer hs.Close()
	oa := hs.URL + "/v1/chat/completions"
	if code, _, _ := post(t, oa, "k", `{"model":"m",`+oaTools+`,"messages":[{"role":"user","content":"q"}]}`); code != 200 {
		t.Fatalf("tool request: %d", code)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req, _ := http.NewRequestWithContext(ctx, "POST", oa, strings.NewReader(`{"model":"m",`+oaTools+`,"messages":[{"role":"user","content":"q"}]}`))
			req.Header.Set("Authorization", "Bearer k")
			if resp, err := http.DefaultClient.Do(req); err == nil {
				resp.Body.Close()
			}
		}()
	}
	defer func() { cancel(); wg.Wait() }() // the hanging requests end before hs closes, also when the wait fails
	poll.Until(t, 5*time.Second, func() (bool, string) {
		peak := srv.Snapshot().PeakInFlight
		return peak["openai"] >= 2, fmt.Sprintf("peak in flight %v, want 2 hanging requests", peak)
	})
	cancel()
	wg.Wait()
	st := srv.Snapshot()
	if got := st.ToolTurn("openai", 1); got.Answers != 1 || got.Calls != 1 {
		t.Errorf("tool turn 1 %+v: want the answered request only, not the hanging ones", got)
	}
	if resp, err := http.Post(hs.URL+"/admin/reset", "", nil); err != nil || resp.StatusCode != 204 {
		t.Fatalf("reset: %v %v", resp, err)
	}
	if st := srv.Snapshot(); len(st.ToolTurns) != 0 || st.PeakInFlight["openai"] != 0 {
		t.Errorf("after reset: %+v", st)
	}
}

// Answered keeps the prompts answered "ok", in order, up to the bound
// Options.RecordAnswered sets; a faulted request is not one; a reset
// forgets them.
func TestAnsweredPromptsAreKeptUpToTheirBound(t *testing.T) {
	if _, err := New(Scenario{}, Options{RecordAnswered: -1}); err == nil || !strings.Contains(err.Error(), "RecordAnswered") {
		t.Fatalf("a negative bound: %v", err)
	}
	srv, _ := New(Scenario{Phases: []Phase{{Requests: 1}, {Requests: 1, Fault: &Fault{Status: 500}}, {}}}, Options{RecordAnswered: 2})
	hs := httptest.NewServer(srv)
	defer hs.Close()
	oa := hs.URL + "/v1/chat/completions"
	for _, p := range []string{"first", "faulted", "second", "third"} {
		post(t, oa, "k", `{"model":"m","messages":[{"role":"user","content":"`+p+`"}]}`)
	}
	if got := srv.Answered(); len(got) != 2 || !strings.HasPrefix(got[0], "first") || !strings.HasPrefix(got[1], "second") {
		t.Fatalf("answered %q, want first and second only", got)
	}
	if code, _, _ := post(t, hs.URL+"/admin/reset", "", ""); code != http.StatusNoContent {
		t.Fatalf("reset: %d", code)
	}
	if got := srv.Answered(); len(got) != 0 {
		t.Fatalf("after a reset: %q", got)
	}
}
