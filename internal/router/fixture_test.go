package router_test

import (
	"net/http/httptest"
	"testing"

	"github.com/agentq/agentq/internal/chaosllm"
	"github.com/agentq/agentq/llmclient"
)

const goodKey = "sk-test-good-0123456789"

// fixture is a chaosllm server over real HTTP and both dialects' providers
// pointed at it.
type fixture struct {
	srv       *chaosllm.Server
	openai    llmclient.Provider
	anthropic llmclient.Provider
}

func newFixture(t *testing.T, sc chaosllm.Scenario, keys ...string) *fixture {
	t.Helper()
	srv, err := chaosllm.New(sc, chaosllm.Options{})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv)
	t.Cleanup(hs.Close)
	if len(keys) == 0 {
		keys = []string{goodKey}
	}
	oa, err := llmclient.NewProvider("openai", llmclient.Options{Name: "oa", BaseURL: hs.URL + "/v1", Keys: keys})
	if err != nil {
		t.Fatal(err)
	}
	an, err := llmclient.NewProvider("anthropic", llmclient.Options{Name: "an", BaseURL: hs.URL, Keys: keys})
	if err != nil {
		t.Fatal(err)
	}
	return &fixture{srv: srv, openai: oa, anthropic: an}
}

func ask(prompt string) llmclient.Request {
	return llmclient.Request{Model: "m-1", Messages: []llmclient.Message{{Role: "user", Content: prompt}}}
}
