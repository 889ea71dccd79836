package agentq_test

import (
	"context"
	"errors"
	"io"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agentq/agentq"
	"github.com/agentq/agentq/internal/chaosllm"
	"github.com/agentq/agentq/internal/testenv"
	"github.com/agentq/agentq/llmclient"
	"github.com/agentq/agentq/retry"
)

// routerConfig is the test configuration with edit applied to its text
// (the tests' own breaker and retry settings).
func routerConfig(t *testing.T, e *testenv.Env, edit func(string) string) agentq.Config {
	t.Helper()
	vars := map[string]string{"CHAOS": e.URL, "K1": testenv.Keys[0], "K2": testenv.Keys[1],
		"AGENTQ_REDIS_ADDR": e.DB.Addr, "AGENTQ_REDIS_DB": strconv.Itoa(e.DB.DB)}
	yaml := testenv.ConfigYAML
	if edit != nil {
		yaml = edit(yaml)
	}
	cfg, err := agentq.ParseConfigWith("testenv.yaml", []byte(yaml), func(k string) (string, bool) { v, ok := vars[k]; return v, ok })
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

func newRouter(t *testing.T, cfg agentq.Config, opts ...agentq.RouterOption) *agentq.Router {
	t.Helper()
	r, err := agentq.NewRouter(t.Context(), cfg, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

func routeProvider(t *testing.T, r *agentq.Router, route string) llmclient.Provider {
	t.Helper()
	p, err := r.Provider(route)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func prompt(text string) llmclient.Request {
	return llmclient.Request{Messages: []llmclient.Message{{Role: "user", Content: text}}}
}

// openaiFails makes every call to the OpenAI endpoint (the first target
// of the route main) fail with fault.
func openaiFails(fault chaosllm.Fault) chaosllm.Scenario {
	return chaosllm.Scenario{Timelines: []chaosllm.Timeline{{Endpoint: "openai", Phases: []chaosllm.Phase{{Fault: &fault}}}}}
}

// A route is a Provider usable with no workflow: its first target fails,
// the second answers.
func TestARouteIsAProviderThatFailsOver(t *testing.T) {
	e := testenv.Start(t, testenv.Options{NoWorker: true, Scenario: openaiFails(chaosllm.Fault{Status: 503})})
	r := newRouter(t, routerConfig(t, e, nil), agentq.WithRouterRetries(0))
	p := routeProvider(t, r, "main")
	if p.Name() != "route:main" {
		t.Errorf("name %q, want route:main", p.Name())
	}
	resp, err := p.Chat(t.Context(), prompt("fail over outside a workflow"))
	if err != nil {
		t.Fatal(err)
	}
	if resp.Provider != "an" || resp.Model != "m-an" || !strings.Contains(resp.Text, "fail over outside a workflow") {
		t.Fatalf("answer %+v, want the second target's (an, m-an)", resp)
	}
	st := e.Chaos.Snapshot()
	if n, ok := st.Count("openai", "", ""), st.Count("anthropic", "", "ok"); n != 1 || ok != 1 {
		t.Fatalf("%d calls to the first target and %d answers from the second, want 1 and 1: %+v", n, ok, st.Calls)
	}
	if _, err := r.Provider("nope"); !errors.Is(err, agentq.ErrUnknownRoute) || !strings.Contains(err.Error(), `"nope"`) {
		t.Fatalf("unknown route: %v", err)
	}
}

// A route whose every target failed is tried again after the backoff
// (resilience.retry); with no retries its failure is returned, classified.
func TestARouteIsTriedAgainAfterItsBackoff(t *testing.T) {
	// the first two calls fail, whichever endpoint they reach
	sc := chaosllm.Scenario{Phases: []chaosllm.Phase{{Requests: 2, Fault: &chaosllm.Fault{Status: 500}}, {}}}
	e := testenv.Start(t, testenv.Options{NoWorker: true, Scenario: sc})
	cfg := routerConfig(t, e, nil)
	none := routeProvider(t, newRouter(t, cfg, agentq.WithRouterRetries(0)), "main")
	_, err := none.Chat(t.Context(), prompt("no retry"))
	if c := retry.ClassOf(err); c != retry.Server {
		t.Fatalf("without retries: %v (class %s), want the route's server failure", err, c)
	}
	if n := e.Chaos.Snapshot().Total; n != 2 {
		t.Fatalf("%d calls, want 2 (each target once)", n)
	}
	if err := e.Chaos.SetScenario(sc); err != nil { // both fail again, once each
		t.Fatal(err)
	}
	p := routeProvider(t, newRouter(t, cfg, agentq.WithRouterRetries(2)), "main")
	start := time.Now()
	resp, err := p.Chat(t.Context(), prompt("tried again"))
	if err != nil {
		t.Fatal(err)
	}
	// the test configuration's backoff: 1s × jitter [0.5, 0.6)
	if waited := time.Since(start); waited < 500*time.Millisecond || resp.Provider != "oa" {
		t.Fatalf("answered by %s after %s, want oa after the backoff of at least 500ms", resp.Provider, waited)
	}
}

// ChatStream streams: the pieces come one by one from the target that
// answered (the first failed before its first piece), and make the whole
// answer. A stream that fails after its first piece ends with its
// target's error: no text starts again under a Provider's caller.
func TestARouteStreamsAsAProvider(t *testing.T) {
	// an answer long enough to come in several pieces (a stream holds back
	// its last 512 bytes until more follows, for the redactor)
	words := make([]string, 300)
	for i := range words {
		words[i] = "word" + strconv.Itoa(1000+i)
	}
	long := []chaosllm.Answer{{Text: strings.Join(words, " ")}}
	sc := openaiFails(chaosllm.Fault{Status: 503})
	sc.Answers = long
	e := testenv.Start(t, testenv.Options{NoWorker: true, Scenario: sc})
	p := routeProvider(t, newRouter(t, routerConfig(t, e, nil), agentq.WithRouterRetries(0)), "main")
	st, err := p.ChatStream(t.Context(), prompt("stream through a route, word by word"))
	if err != nil {
		t.Fatal(err)
	}
	var pieces []string
	for {
		piece, err := st.Recv()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		pieces = append(pieces, piece)
	}
	st.Close()
	resp := st.Response()
	if resp == nil || resp.Provider != "an" || strings.Join(pieces, "") != resp.Text || resp.Text != long[0].Text {
		t.Fatalf("streamed %q, answer %+v", pieces, resp)
	}
	if len(pieces) < 2 || e.Chaos.Snapshot().StreamChunks["anthropic"] < 2 {
		t.Fatalf("%d pieces (%v chunks sent), want the answer in pieces", len(pieces), e.Chaos.Snapshot().StreamChunks)
	}

	sc = openaiFails(chaosllm.Fault{Kind: chaosllm.KindStreamError, Chunks: 150})
	sc.Answers = long
	if err := e.Chaos.SetScenario(sc); err != nil {
		t.Fatal(err)
	}
	st, err = p.ChatStream(t.Context(), prompt("a stream that breaks midway"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	var got []string
	for {
		piece, err := st.Recv()
		if err == nil {
			got = append(got, piece)
			continue
		}
		if err == io.EOF || len(got) == 0 {
			t.Fatalf("after %q: %v, want the first target's failure midway", got, err)
		}
		if _, again := st.Recv(); again == nil || again.Error() != err.Error() {
			t.Fatalf("Recv after the failure: %v, want %v again", again, err)
		}
		break
	}
	if n := e.Chaos.Snapshot().Count("anthropic", "", ""); n != 1 {
		t.Fatalf("%d calls to the second target, want only the first stream's", n)
	}
}

// A breaker opened by one process's calls is seen by another process's
// router: its first call skips the open target without calling it.
func TestARoutersBreakerIsClusterWide(t *testing.T) {
	e := testenv.Start(t, testenv.Options{NoWorker: true, Scenario: openaiFails(chaosllm.Fault{Status: 503})})
	// a cooldown no test outlasts: no probe calls the open target meanwhile
	cfg := routerConfig(t, e, func(y string) string { return strings.Replace(y, "cooldown: 2s", "cooldown: 10m", 1) })
	one := routeProvider(t, newRouter(t, cfg, agentq.WithRouterRetries(0)), "main")
	for i := range 3 { // resilience.breaker.consecutive_failures
		if resp, err := one.Chat(t.Context(), prompt("open the breaker "+strconv.Itoa(i))); err != nil || resp.Provider != "an" {
			t.Fatalf("call %d: %+v %v", i, resp, err)
		}
	}
	calls := e.Chaos.Snapshot().Count("openai", "", "")
	if calls != 3 {
		t.Fatalf("%d calls to the first target, want 3", calls)
	}
	two := routeProvider(t, newRouter(t, cfg, agentq.WithRouterRetries(0)), "main")
	for i := range 2 {
		resp, err := two.Chat(t.Context(), prompt("skip it "+strconv.Itoa(i)))
		if err != nil || resp.Provider != "an" {
			t.Fatalf("second router, call %d: %+v %v", i, resp, err)
		}
	}
	if n := e.Chaos.Snapshot().Count("openai", "", ""); n != calls {
		t.Fatalf("the second router called the open target %d time(s)", n-calls)
	}
}

// NewRouter refuses an empty Config with one line naming it.
func TestNewRouterRefusesAnEmptyConfig(t *testing.T) {
	_, err := agentq.NewRouter(context.Background(), agentq.Config{})
	if err == nil || !strings.Contains(err.Error(), "NewRouter: the Config is empty") {
		t.Fatalf("got %v", err)
	}
}
