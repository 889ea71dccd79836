package llmclient

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/agentq/agentq/internal/chaosllm"
)

// Many answers that never end, read at once, are held to the shared budget
// and every byte they were charged is given back when their bodies close;
// an ordinary answer read meanwhile still passes.
func TestSharedAnswerBudgetIsReturned(t *testing.T) {
	endless := chaosllm.Fault{Kind: chaosllm.KindEndless}
	srv, err := chaosllm.New(chaosllm.Scenario{Timelines: []chaosllm.Timeline{
		{Key: "sk-endless-0123456789", Phases: []chaosllm.Phase{{Fault: &endless}}}}}, chaosllm.Options{})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv)
	t.Cleanup(hs.Close)
	mk := func(key string) *openaiProvider {
		a, err := newOpenAI(Options{Name: "oa", BaseURL: hs.URL + "/v1", Keys: []string{key}})
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	bad, good := mk("sk-endless-0123456789"), mk("sk-fine-0123456789")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req := Request{Model: "m", Messages: []Message{{Role: "user", Content: "hi"}}}
	var wg sync.WaitGroup
	errs := make(chan error, 40)
	for range 40 {
		wg.Go(func() {
			_, err := bad.Chat(ctx, req)
			errs <- err
		})
	}
	if _, err := good.Chat(ctx, req); err != nil {
		t.Errorf("an ordinary answer failed while endless ones were read: %v", err)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if e, ok := AsError(err); !ok || e.Type != TypeTooLarge {
			t.Fatalf("an endless answer ended with %v, want %s", err, TypeTooLarge)
		}
	}
	if n := answersInFlight.Load(); n != 0 {
		t.Errorf("%d bytes are still charged to the shared budget after every body closed", n)
	}
}

// Retry-After in seconds, in milliseconds (preferred) and as a date, capped.
func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		h    http.Header
		want time.Duration
	}{
		{http.Header{"Retry-After": {"7"}}, 7 * time.Second},
		{http.Header{"Retry-After-Ms": {"1500"}, "Retry-After": {"2"}}, 1500 * time.Millisecond},
		{http.Header{"Retry-After": {"Mon, 30 Nov 2026 12:00:30 GMT"}}, 30 * time.Second},
		{http.Header{"Retry-After": {"3600"}}, retryAfterCap},
		{http.Header{}, 0},
	} {
		if got := parseRetryAfter(c.h, now); got != c.want {
			t.Errorf("%v: %v, want %v", c.h, got, c.want)
		}
	}
}
