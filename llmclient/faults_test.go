package llmclient_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/agentq/agentq/internal/chaosllm"
	"github.com/agentq/agentq/internal/poll"
	"github.com/agentq/agentq/llmclient"
	"github.com/agentq/agentq/retry"
)

// Every fault chaosllm can script reaches both real SDKs over real HTTP and
// comes back as one *Error of the class docs/failures.md gives it.
func TestEveryFaultIsClassified(t *testing.T) {
	cases := []struct {
		name  string
		fault chaosllm.Fault
		class retry.Class
	}{
		{"429", chaosllm.Fault{Status: 429}, retry.RateLimited},
		{"quota", chaosllm.Fault{Status: 429, Code: "insufficient_quota", Type: "insufficient_quota"}, retry.Quota},
		{"500", chaosllm.Fault{Status: 500}, retry.Server},
		{"502", chaosllm.Fault{Status: 502}, retry.Server},
		{"503", chaosllm.Fault{Status: 503}, retry.Server},
		{"504", chaosllm.Fault{Status: 504}, retry.Server},
		{"529 overloaded", chaosllm.Fault{Status: 529}, retry.Server},
		{"401", chaosllm.Fault{Status: 401}, retry.Auth},
		{"403", chaosllm.Fault{Status: 403}, retry.Auth},
		{"400", chaosllm.Fault{Status: 400}, retry.BadRequest},
		{"422", chaosllm.Fault{Status: 422}, retry.BadRequest},
		{"context length", chaosllm.Fault{Status: 400, Code: "context_length_exceeded", Type: "invalid_request_error",
			Message: "This model's maximum context length is 8192 tokens"}, retry.ContextLength},
		{"content filter", chaosllm.Fault{Status: 400, Code: "content_filter", Type: "invalid_request_error",
			Message: "Your request was rejected as a result of our safety system"}, retry.ContentFilter},
		{"404 model", chaosllm.Fault{Status: 404}, retry.NotFound},
		{"empty 500", chaosllm.Fault{Kind: chaosllm.KindEmpty}, retry.Server},
		{"html 502", chaosllm.Fault{Kind: chaosllm.KindHTML}, retry.Server},
		{"malformed 200", chaosllm.Fault{Kind: chaosllm.KindMalformed}, retry.Server},
		{"reset", chaosllm.Fault{Kind: chaosllm.KindReset}, retry.Network},
		{"error event in 200 stream", chaosllm.Fault{Kind: chaosllm.KindStreamError}, retry.Server},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := c.fault
			fx := newFixture(t, chaosllm.Scenario{Phases: []chaosllm.Phase{{Fault: &f}}})
			for ep, p := range fx.Providers() {
				for _, stream := range []bool{false, true} {
					err := call(p, stream, 0)
					if got := retry.ClassOf(err); got != c.class {
						t.Errorf("%s stream=%v: class %s, want %s (err: %v)", ep, stream, got, c.class, err)
					}
				}
			}
		})
	}
}

func call(p llmclient.Provider, stream bool, timeout time.Duration) error {
	ctx := context.Background()
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	if !stream {
		_, err := p.Chat(ctx, ask("hi"))
		return err
	}
	st, err := p.ChatStream(ctx, ask("hi"))
	if err == nil {
		_, err = st.Collect()
	}
	return err
}

func TestHangIsATimeout(t *testing.T) {
	fx := newFixture(t, chaosllm.Scenario{Phases: []chaosllm.Phase{{Fault: &chaosllm.Fault{Kind: chaosllm.KindHang}}}})
	for ep, p := range fx.Providers() {
		for _, stream := range []bool{false, true} {
			if got := retry.ClassOf(call(p, stream, 100*time.Millisecond)); got != retry.Timeout {
				t.Errorf("%s stream=%v: class %s, want timeout", ep, stream, got)
			}
		}
	}
}

func TestRefusedConnectionsAreNetworkFailures(t *testing.T) {
	srv, err := chaosllm.New(chaosllm.Scenario{Phases: []chaosllm.Phase{
		{Name: "down", Duration: chaosllm.Duration(time.Hour), Fault: &chaosllm.Fault{Kind: chaosllm.KindRefuse}}}}, chaosllm.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	addrc := make(chan net.Addr, 1)
	done := make(chan error, 1)
	go func() { done <- chaosllm.Serve(ctx, "127.0.0.1:0", srv, func(a net.Addr) { addrc <- a }) }()
	addr := (<-addrc).String()
	t.Cleanup(func() { cancel(); <-done })
	// wait until the listener is closed
	poll.Until(t, 5*time.Second, func() (bool, string) {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			return true, ""
		}
		c.Close()
		return false, "listener still open in a refuse phase"
	})
	oa, _ := llmclient.NewProvider("openai", llmclient.Options{Name: "oa", BaseURL: "http://" + addr + "/v1", Keys: []string{goodKey},
		Transport: &http.Transport{DisableKeepAlives: true}})
	an, _ := llmclient.NewProvider("anthropic", llmclient.Options{Name: "an", BaseURL: "http://" + addr, Keys: []string{goodKey},
		Transport: &http.Transport{DisableKeepAlives: true}})
	for _, p := range []llmclient.Provider{oa, an} {
		err := call(p, false, 0)
		e, ok := llmclient.AsError(err)
		if retry.ClassOf(err) != retry.Network || !ok || e.Status != 0 {
			t.Errorf("%s: %v, want a network error", p.Name(), err)
		}
	}
	// the refuse phase ends: connections are accepted again
	if err := srv.SetScenario(chaosllm.Scenario{}); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, 5*time.Second, func() (bool, string) {
		_, err := oa.Chat(context.Background(), ask("hi"))
		return err == nil, fmt.Sprintf("listener not reopened: %v", err)
	})
}
