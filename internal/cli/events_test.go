package cli_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hibiken/asynq"

	"github.com/agentq/agentq/internal/chaosllm"
	"github.com/agentq/agentq/internal/cli"
	"github.com/agentq/agentq/internal/client"
	"github.com/agentq/agentq/internal/dashboard"
	"github.com/agentq/agentq/internal/poll"
	"github.com/agentq/agentq/internal/record"
	"github.com/agentq/agentq/internal/testenv"
)

// chain: a on route main (openai, then anthropic), b and c on solo
// (openai); openai's first answer is a 500 (a fails over to anthropic)
// and its second a 503 (b's first attempt fails and backs off).
const eventChain = `name: chain
defaults: { max_retries: 3 }
steps:
  - { id: a, route: main, prompt: "first" }
  - { id: b, route: solo, prompt: "second {{ .Steps.a.Output }}", depends_on: [a] }
  - { id: c, route: solo, prompt: "third", depends_on: [b] }
`

// wantChain is the chain's log, once each, in order.
var wantChain = []string{
	"workflow.submitted", "step.ready a",
	"step.started a #1", "llm.call a #1 oa/m-oa server", "llm.call a #1 an/m-an", "step.done a #1 an/m-an",
	"step.ready b",
	"step.started b #1", "llm.call b #1 oa/m-solo server", "step.failed b #1 server",
	"step.started b #2", "llm.call b #2 oa/m-solo", "step.done b #2 oa/m-solo",
	"step.ready c",
	"step.started c #1", "llm.call c #1 oa/m-solo", "step.done c #1 oa/m-solo",
	"workflow.ended completed",
}

// eventLine is an event as wantChain says it.
func eventLine(e record.Event) string {
	s := e.Type
	if e.Step != "" {
		s += " " + e.Step
	}
	if e.Attempt > 0 {
		s += fmt.Sprintf(" #%d", e.Attempt)
	}
	if e.Target != "" {
		s += " " + e.Target
	}
	if e.Class != "" {
		s += " " + e.Class
	}
	if e.State != "" {
		s += " " + e.State
	}
	return s
}

func collect(t *testing.T, seq func(func(record.Event, error) bool)) ([]record.Event, error) {
	t.Helper()
	var out []record.Event
	for e, err := range seq {
		if err != nil {
			return out, err
		}
		out = append(out, e)
	}
	return out, nil
}

func eventLines(evs []record.Event) []string {
	out := make([]string, len(evs))
	for i, e := range evs {
		out[i] = eventLine(e)
	}
	return out
}

func sameLog(t *testing.T, who string, got []record.Event, want []string) {
	t.Helper()
	if g := eventLines(got); !slices.Equal(g, want) {
		t.Errorf("%s read:\n  %s\nwant:\n  %s", who, strings.Join(g, "\n  "), strings.Join(want, "\n  "))
	}
}

// One workflow with a failover and a backoff, read while it runs and
// after it ended, through each reader: the Go client over Redis, the
// dashboard's event stream (and the Go client over it), and enqueue
// follow. Each gets every event once, in order; a reader that resumes
// after an event gets every later one once.
func TestEveryReaderGetsTheWholeLogOnceInOrder(t *testing.T) {
	e := testenv.Start(t, testenv.Options{Scenario: chaosllm.Scenario{Timelines: []chaosllm.Timeline{{Endpoint: "openai", Phases: []chaosllm.Phase{
		{Requests: 1, Fault: &chaosllm.Fault{Status: 500}}, {Requests: 1, Fault: &chaosllm.Fault{Status: 503}}, {}}}}}})
	srv, err := dashboard.New(t.Context(), dashboard.Options{Config: e.Config, Redis: e.Redis, AsynqOpt: asynq.RedisClientOpt{Addr: e.DB.Addr, DB: e.DB.DB}})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv)
	defer func() { hs.Close(); srv.Close() }()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	overRedis, err := client.Open(ctx, e.Config)
	if err != nil {
		t.Fatal(err)
	}
	defer overRedis.Close()
	overHTTP := client.Remote(e.Config, hs.URL, "")

	id := e.Submit(t, e.Spec(eventChain))
	type read struct {
		evs []record.Event
		err error
	}
	live := map[string]chan read{"redis": make(chan read, 1), "sse": make(chan read, 1)}
	go func() { evs, err := collect(t, overRedis.Events(ctx, id, "")); live["redis"] <- read{evs, err} }()
	go func() { evs, err := collect(t, overHTTP.Events(ctx, id, "")); live["sse"] <- read{evs, err} }()
	vars, cfgFile := envFor(t, e)
	followed := make(chan result, 1)
	go func() { followed <- run(t, cli.Enqueue, vars, "--config", cfgFile, "follow", id, "--json") }()

	// a reader that connects mid-run, after b's first attempt began
	var mark string
	poll.Until(t, 20*time.Second, func() (bool, string) {
		evs, _ := e.Store.Events(ctx, id, "", 100)
		for _, ev := range evs {
			if ev.Type == record.EventStarted && ev.Step == "b" {
				mark = ev.ID
				return true, ""
			}
		}
		return false, "b's first attempt has not begun"
	})
	midway := make(chan read, 1)
	go func() { evs, err := rawSSE(ctx, hs.URL, id, mark); midway <- read{evs, err} }()

	for who, ch := range live {
		r := <-ch
		if r.err != nil {
			t.Fatalf("%s: %v", who, r.err)
		}
		sameLog(t, who+" (live)", r.evs, wantChain)
	}
	r := <-midway
	if r.err != nil {
		t.Fatal(r.err)
	}
	at := slices.Index(wantChain, "step.started b #1")
	sameLog(t, "SSE from Last-Event-ID", r.evs, wantChain[at+1:])

	f := <-followed
	if f.code != 0 {
		t.Fatalf("follow: exit %d %q", f.code, f.err)
	}
	var fromCLI []record.Event
	sc := bufio.NewScanner(strings.NewReader(f.out))
	for sc.Scan() {
		var ev record.Event
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			t.Fatalf("follow --json printed %q: %v", sc.Text(), err)
		}
		fromCLI = append(fromCLI, ev)
	}
	sameLog(t, "enqueue follow --json", fromCLI, wantChain)

	// after the end: the whole history, and the stream ends
	after, err := collect(t, overHTTP.Events(ctx, id, ""))
	if err != nil {
		t.Fatal(err)
	}
	sameLog(t, "SSE after the end", after, wantChain)
	// what the events say besides their types
	for _, ev := range after {
		switch {
		case ev.Type == record.EventFailed && (ev.NextAttemptAt == nil || ev.Reason == ""):
			t.Errorf("step.failed without its next attempt or reason: %+v", ev)
		case ev.Type == record.EventLLMCall && (ev.Route == "" || ev.Key == "" || ev.Class == "" && ev.PromptTokens == 0):
			t.Errorf("llm.call without its route, key or tokens: %+v", ev)
		case ev.Type == record.EventStarted && ev.Worker == "":
			t.Errorf("step.started without its worker: %+v", ev)
		}
	}
	text := run(t, cli.Enqueue, vars, "--config", cfgFile, "follow", id)
	if text.code != 0 || !strings.Contains(text.out, "b attempt 1 failed (server): route solo") || !strings.Contains(text.out, "a llm main -> oa/m-oa key oa#1") ||
		!strings.Contains(text.out, "workflow completed") {
		t.Fatalf("follow: exit %d\n%s\n%s", text.code, text.out, text.err)
	}
}

// rawSSE reads a workflow's event stream after the event id after,
// checking each event's framing, until the server says it ended.
func rawSSE(ctx context.Context, base, id, after string) ([]record.Event, error) {
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+"/api/v1/workflows/"+id+"/events", nil)
	req.Header.Set("Last-Event-ID", after)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); resp.StatusCode != 200 || ct != "text/event-stream" {
		return nil, fmt.Errorf("status %d, content type %q", resp.StatusCode, ct)
	}
	var (
		out          []record.Event
		idLine, kind string
	)
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "id: "):
			idLine = line[4:]
		case strings.HasPrefix(line, "event: "):
			kind = line[7:]
		case strings.HasPrefix(line, "data: "):
			if kind == "end" {
				return out, nil
			}
			var ev record.Event
			if err := json.Unmarshal([]byte(line[6:]), &ev); err != nil {
				return out, err
			}
			if ev.ID != idLine || ev.Type != kind {
				return out, fmt.Errorf("event %q: id line %q, event line %q", line, idLine, kind)
			}
			out = append(out, ev)
		}
	}
	return out, fmt.Errorf("the stream closed without its end: %v", sc.Err())
}

// follow of a workflow that was blocked and then rerun to completion
// reads the first run's dead step and goes on through the rerun to the
// end (it used to stop at the dead step, whose workflow had completed).
func TestFollowReadsAReranWorkflowToItsEnd(t *testing.T) {
	e := testenv.Start(t, testenv.Options{Scenario: chaosllm.Scenario{Phases: []chaosllm.Phase{
		{Requests: 1, Fault: &chaosllm.Fault{Status: 400}}, {}}}})
	id := e.Submit(t, e.Spec(hello))
	e.Wait(t, id, 15*time.Second, "blocked")
	if _, err := e.Client.Rerun(t.Context(), id, "greet"); err != nil {
		t.Fatal(err)
	}
	e.Wait(t, id, 15*time.Second, "completed")
	vars, cfgFile := envFor(t, e)
	r := run(t, cli.Enqueue, vars, "--config", cfgFile, "follow", id)
	if r.code != 0 || !strings.Contains(r.out, "greet dead-lettered") || !strings.Contains(r.out, "workflow rerun (run 1) from greet") ||
		!strings.Contains(r.out, "workflow completed") {
		t.Fatalf("follow: exit %d\n%s%s", r.code, r.out, r.err)
	}
}
