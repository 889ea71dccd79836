package router_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/agentq/agentq/internal/chaosllm"
	"github.com/agentq/agentq/internal/router"
	"github.com/agentq/agentq/retry"
)

// A request over a target's max_input_bytes is not sent to it: it fails
// there as context_length, and the route's context-window fallback (a
// larger window) answers it; a request that fits goes to the target.
func TestMaxInputBytesSendsALongPromptToTheContextFallback(t *testing.T) {
	fx := newFixture(t, chaosllm.Scenario{}, goodKey)
	small := router.Target{Provider: fx.OpenAI, Model: "m-small", Timeout: 5 * time.Second, MaxInputBytes: 100}
	large := router.Target{Provider: fx.Anthropic, Model: "m-large", Timeout: 5 * time.Second, MaxInputBytes: 10000}
	r, err := router.NewRouter([]router.Route{{Name: "r", Targets: []router.Target{small}, ContextWindowFallback: &large}},
		routerOptions(router.RouterOptions{}))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := r.Chat(context.Background(), "r", ask("short"))
	if err != nil || resp.Model != "m-small" {
		t.Fatalf("a short prompt: %+v %v", resp, err)
	}
	resp, err = r.Chat(context.Background(), "r", ask(strings.Repeat("x", 500)))
	if err != nil || resp.Model != "m-large" {
		t.Fatalf("a long prompt: %+v %v, want the fallback's answer", resp, err)
	}
	if n := fx.Srv.Snapshot().Count("openai", "", "ok"); n != 1 {
		t.Fatalf("the small target was called %d times, want once (the long prompt never sent to it)", n)
	}
	_, err = r.Chat(context.Background(), "r", ask(strings.Repeat("x", 20000)))
	var sk *router.SkippedError
	if retry.ClassOf(err) != retry.ContextLength || !errors.As(err, &sk) || !strings.Contains(sk.Reason, "over the target's max_input_bytes") {
		t.Fatalf("a prompt over both: %v, want context_length", err)
	}
	if n := fx.Srv.Snapshot().Total; n != 2 {
		t.Fatalf("%d calls reached chaosllm, want 2", n)
	}
}
