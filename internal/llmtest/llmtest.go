// Package llmtest is what the provider layer's and the router's tests
// share: a chaosllm server over real HTTP and a provider of each dialect
// pointed at it.
package llmtest

import (
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/agentq/agentq/internal/chaosllm"
	"github.com/agentq/agentq/llmclient"
)

// GoodKey is the key the fixture's providers use when given none.
const GoodKey = "sk-test-good-0123456789"

// Fixture is a chaosllm server and both dialects' providers ("oa" and
// "an") pointed at it.
type Fixture struct {
	Srv       *chaosllm.Server
	OpenAI    llmclient.Provider
	Anthropic llmclient.Provider
}

// New starts the server for sc (closed at the test's end); keys are the
// providers' keys (none: GoodKey).
func New(t *testing.T, sc chaosllm.Scenario, keys ...string) *Fixture {
	t.Helper()
	srv, err := chaosllm.New(sc, chaosllm.Options{})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv)
	t.Cleanup(hs.Close)
	if len(keys) == 0 {
		keys = []string{GoodKey}
	}
	oa, err := llmclient.NewProvider("openai", llmclient.Options{Name: "oa", BaseURL: hs.URL + "/v1", Keys: keys})
	if err != nil {
		t.Fatal(err)
	}
	an, err := llmclient.NewProvider("anthropic", llmclient.Options{Name: "an", BaseURL: hs.URL, Keys: keys})
	if err != nil {
		t.Fatal(err)
	}
	return &Fixture{Srv: srv, OpenAI: oa, Anthropic: an}
}

// Providers are the providers by chaosllm endpoint.
func (f *Fixture) Providers() map[string]llmclient.Provider {
	return map[string]llmclient.Provider{"openai": f.OpenAI, "anthropic": f.Anthropic}
}

// Ask is a one-message request.
func Ask(prompt string) llmclient.Request {
	return llmclient.Request{Model: "m-1", Messages: []llmclient.Message{{Role: "user", Content: prompt}}}
}

// Rounds starts a chaosllm server over plain HTTP/1.1 (closed at the
// test's end) that answers calls in rounds of width: a call is answered
// once the width-th call of its round has come in, so that a round holds
// width connections at once. It returns the server's URL and the count
// of connections opened to it.
func Rounds(t *testing.T, width int) (string, *atomic.Int32) {
	t.Helper()
	srv, err := chaosllm.New(chaosllm.Scenario{Keys: []string{GoodKey}}, chaosllm.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	arrived := 0
	full := sync.NewCond(&mu)
	dialed := new(atomic.Int32)
	hs := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		arrived++
		end := (arrived + width - 1) / width * width // the count that completes this call's round
		full.Broadcast()
		for arrived < end {
			full.Wait()
		}
		mu.Unlock()
		srv.ServeHTTP(w, r)
	}))
	hs.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			dialed.Add(1)
		}
	}
	hs.Start()
	t.Cleanup(hs.Close)
	return hs.URL, dialed
}
