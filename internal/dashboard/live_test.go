package dashboard_test

import (
	"context"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/hibiken/asynq"

	"github.com/agentq/agentq/internal/chaosllm"
	"github.com/agentq/agentq/internal/dashboard"
	"github.com/agentq/agentq/internal/engine"
	"github.com/agentq/agentq/internal/poll"
	"github.com/agentq/agentq/internal/testenv"
)

// A running workflow's page follows it without a reload: its state and
// steps change as they do, the streamed text of a step appears, and the
// timeline has one bar per attempt, with the backoff between b's two.
func TestBrowserFollowsARunningWorkflow(t *testing.T) {
	ctx := newBrowser(t, 120*time.Second)
	release := make(chan struct{})
	e := testenv.Start(t, testenv.Options{Scenario: chaosllm.Scenario{Timelines: []chaosllm.Timeline{{Endpoint: "openai", Phases: []chaosllm.Phase{
		{Requests: 1}, {Requests: 1, Fault: &chaosllm.Fault{Status: 503}}, {}}}},
		// a's answer holds a right-to-left override: shown as its escape
		Answers: []chaosllm.Answer{{Match: "first", Text: "invoice \u202Efdp.exe done"}}},
		// the gate holds the workflow running until the page is open
		Steps: map[string]engine.StepFunc{"gate": func(ctx context.Context, s *engine.CodeStep) (any, error) {
			select {
			case <-release:
				return "open", nil
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}}})
	srv, err := dashboard.New(t.Context(), dashboard.Options{Config: e.Config, Redis: e.Redis, AsynqOpt: asynq.RedisClientOpt{Addr: e.DB.Addr, DB: e.DB.DB}})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv)
	t.Cleanup(func() { hs.Close(); srv.Close() })
	id := e.Submit(t, e.Spec(`name: live
steps:
  - { id: a, route: solo, prompt: "first", stream: true }
  - { id: gate, run: gate, depends_on: [a] }
  - { id: b, route: solo, prompt: "then this", depends_on: [gate] }
`))
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	eval := func(js string) string {
		t.Helper()
		v, err := chromedp.Run(ctx, chromedp.Evaluate[string](js))
		must(err)
		return v
	}
	must(chromedp.Do(ctx, chromedp.Navigate(hs.URL+"/workflows/"+id), chromedp.WaitVisible("#state")))
	first := eval(`document.getElementById("state").textContent`)
	// a mark that a reload would wipe
	eval(`window.agentqMark = "same page"`)
	// the page follows a's stream while the gate holds
	poll.Until(t, 60*time.Second, func() (bool, string) {
		st := eval(`String(document.getElementById("stream-a") && document.getElementById("stream-a").textContent)`)
		return st != "null" && st != "", "no streamed text of a yet"
	})
	close(release)
	poll.Until(t, 60*time.Second, func() (bool, string) {
		st := eval(`document.getElementById("state").textContent + "/" + document.getElementById("live").dataset.live`)
		return st == "completed/ended", "the page says " + st
	})
	if mark := eval(`String(window.agentqMark)`); mark != "same page" {
		t.Fatalf("the page was reloaded (mark %q)", mark)
	}
	count := func(sel string) int {
		t.Helper()
		n, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll(`+"`"+sel+"`"+`).length`))
		must(err)
		return n
	}
	if a, b, backoff := count(`#timeline rect.attempt[data-step="a"]`), count(`#timeline rect.attempt[data-step="b"]`), count(`#timeline line.gap.backoff[data-step="b"]`); a != 1 || b != 2 || backoff != 1 {
		t.Fatalf("timeline: %d bars for a, %d for b, %d backoffs for b; want 1, 2, 1", a, b, backoff)
	}
	if failed, done := count(`#timeline rect.attempt.failed[data-step="b"]`), count(`#timeline rect.attempt.done`); failed != 1 || done != 3 {
		t.Fatalf("timeline: %d failed attempts of b, %d done; want 1 and 3 (a, gate, b)", failed, done)
	}
	out := eval(`document.querySelector("#step-a pre.out").textContent`)
	streamed := eval(`document.getElementById("stream-a").textContent`)
	if out == "" || streamed != out {
		t.Fatalf("a's streamed text %q, its output on the page %q", streamed, out)
	}
	if !strings.Contains(streamed, `\u202e`) || strings.ContainsRune(streamed, '\u202E') {
		t.Fatalf("a's streamed text %q: want its U+202E shown as \\u202e, not raw", streamed)
	}
	if calls := count(`#calls-b tr.call`); calls < 3 { // two calls and the failure between them
		t.Fatalf("b's call inspector has %d entries", calls)
	}
	if row := eval(`document.querySelector("#step-b").textContent`); !strings.Contains(row, "done") || first != "running" {
		t.Fatalf("b's row %q; the page first said %q", row, first)
	}
	if dir := os.Getenv("AGENTQ_UPDATE_SCREENSHOT"); dir != "" {
		buf, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
		must(err)
		must(os.WriteFile(filepath.Join("..", "..", "docs", "timeline.png"), buf, 0o644))
	}
}
