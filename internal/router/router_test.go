package router_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/agentq/agentq/internal/chaosllm"
	"github.com/agentq/agentq/internal/defaults"
	"github.com/agentq/agentq/internal/router"
	"github.com/agentq/agentq/llmclient"
	"github.com/agentq/agentq/retry"
)

// One JSON log line per call, naming the key by fingerprint only.
func TestRouterLogsOneLinePerCall(t *testing.T) {
	fx := newFixture(t, chaosllm.Scenario{Timelines: []chaosllm.Timeline{
		{Endpoint: "openai", Phases: []chaosllm.Phase{{Fault: &chaosllm.Fault{Status: 503}}}}}}, goodKey)
	var buf bytes.Buffer
	r, err := router.NewRouter([]router.Route{{Name: "r", Strategy: "ordered", Targets: []router.Target{
		{Provider: fx.OpenAI, Model: "m-oa", Timeout: 5 * time.Second},
		{Provider: fx.Anthropic, Model: "m-an", Timeout: 5 * time.Second},
	}}}, routerOptions(router.RouterOptions{Logger: slog.New(slog.NewJSONHandler(&buf, nil))}))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := r.Chat(context.Background(), "r", ask("hello there"))
	if err != nil || resp.Provider != "an" {
		t.Fatalf("chat: %+v %v", resp, err)
	}
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 2 {
		t.Fatalf("want 2 log lines, got %d:\n%s", len(lines), buf.String())
	}
	want := []struct{ provider, class string }{{"oa", "server"}, {"an", "ok"}}
	for i, l := range lines {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatal(err)
		}
		if m["msg"] != "llm_call" || m["provider"] != want[i].provider || m["class"] != want[i].class ||
			m["input_len"] != float64(len("hello there")) || m["key"] != llmclient.Fingerprint(want[i].provider, 0, goodKey) {
			t.Errorf("line %d: %v", i, m)
		}
		for _, k := range []string{"model", "timeout", "dur", "route"} {
			if _, ok := m[k]; !ok {
				t.Errorf("line %d lacks %q: %s", i, k, l)
			}
		}
	}
	if strings.Contains(buf.String(), goodKey) {
		t.Fatal("a log line contains the API key")
	}
}

// A key that cools on one router is skipped by another sharing the pools.
func TestCoolingKeyIsSkippedWithoutACall(t *testing.T) {
	fx := newFixture(t, chaosllm.Scenario{Phases: []chaosllm.Phase{
		{Requests: 1, Fault: &chaosllm.Fault{Status: 429, RetryAfter: chaosllm.Duration(time.Minute)}}, {}}}, goodKey)
	pools := router.NewKeyPools(nil, nil, nil)
	route := []router.Route{{Name: "r", Targets: []router.Target{{Provider: fx.OpenAI, Model: "m"}}}}
	r1, _ := router.NewRouter(route, routerOptions(router.RouterOptions{Keys: pools}))
	_, err := r1.Chat(context.Background(), "r", ask("x"))
	var re *router.RouteError
	if retry.ClassOf(err) != retry.RateLimited || !errors.As(err, &re) {
		t.Fatalf("first call: %v", err)
	}
	if d := re.RetryAfter(time.Now()); d < 59*time.Second || d > time.Minute {
		t.Fatalf("retry after %s, want the capped cooldown", d)
	}
	r2, _ := router.NewRouter(route, routerOptions(router.RouterOptions{Keys: pools}))
	_, err = r2.Chat(context.Background(), "r", ask("x"))
	var ku *router.SkippedError
	if !errors.As(err, &ku) || ku.Reason != router.SkipKeysCooling {
		t.Fatalf("second router: %v, want keys unavailable", err)
	}
	if n := fx.Srv.Snapshot().Total; n != 1 {
		t.Fatalf("%d calls, want 1: the cooling key must not be called", n)
	}
}

// A stream from a route falls over to the next target when the first
// fails before answering.
func TestAStreamFallsOverBeforeItsFirstPiece(t *testing.T) {
	fx := newFixture(t, chaosllm.Scenario{Timelines: []chaosllm.Timeline{
		{Endpoint: "openai", Phases: []chaosllm.Phase{{Fault: &chaosllm.Fault{Status: 503}}}}}})
	r, err := router.NewRouter([]router.Route{{Name: "r", Strategy: "ordered", Targets: []router.Target{
		{Provider: fx.OpenAI, Model: "m-oa", Timeout: 5 * time.Second},
		{Provider: fx.Anthropic, Model: "m-an", Timeout: 5 * time.Second},
	}}}, routerOptions(router.RouterOptions{}))
	if err != nil {
		t.Fatal(err)
	}
	st, err := r.ChatStream(context.Background(), "r", ask("stream through a route"))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := st.Collect()
	if err != nil || resp.Text != chaosllm.Reply("stream through a route\n") || resp.Provider != "an" {
		t.Fatalf("streamed %+v, %v", resp, err)
	}
	if _, err := r.ChatStream(context.Background(), "nope", ask("x")); err == nil {
		t.Fatal("unknown route accepted")
	}
	// plain calls along the same route
	if resp, err := r.Chat(context.Background(), "r", ask("x")); err != nil || resp.Provider != "an" {
		t.Fatalf("chat: %+v %v", resp, err)
	}
	if st := fx.Srv.Snapshot(); st.Count("openai", "", "status_503") != 2 || st.Count("anthropic", "", "ok") != 2 {
		t.Fatalf("calls %+v", st.Calls)
	}
}

// A request the provider refused stops the route and dead-letters the step,
// even when an earlier key of the same attempt was rejected (retryable on
// its own).
func TestRouteErrorClassBadRequestAfterAKeyProblem(t *testing.T) {
	e := &router.RouteError{Route: "r", Attempts: []error{
		&llmclient.Error{Status: 401}, &llmclient.Error{Status: 400}}}
	if c := e.Class(); c != retry.BadRequest {
		t.Fatalf("class %s, want bad_request", c)
	}
	e = &router.RouteError{Route: "r", Attempts: []error{
		&llmclient.Error{Status: 503}, &llmclient.Error{Status: 500}}}
	if c := e.Class(); c != retry.Server {
		t.Fatalf("class %s, want server", c)
	}
}

// routerOptions is o with the built-in key cooldowns and health scoring
// where it sets none: what the configuration's defaults give a worker's
// router.
func routerOptions(o router.RouterOptions) router.RouterOptions {
	if o.DefaultCooldown == 0 {
		o.DefaultCooldown, o.MaxCooldown = defaults.KeyCooldown, defaults.KeyMaxCooldown
	}
	if o.Health == nil {
		h, err := router.NewHealth(nil, router.DefaultHealthConfig(), o.Now, nil)
		if err != nil {
			panic(err) // the built-in scoring is valid
		}
		o.Health = h
	}
	return o
}
