// Package llmtest is what the provider layer's and the router's tests
// share: a chaosllm server over real HTTP and a provider of each dialect
// pointed at it.
package llmtest

import (
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

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

// AtOnce makes n calls of call at once and fails the test on the first
// error, named by what.
func AtOnce(t *testing.T, n int, what string, call func() error) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for range n {
		wg.Go(func() {
			if err := call(); err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("%s: %v", what, err)
	}
}

// Rounds starts a chaosllm server over plain HTTP/1.1 (closed at the
// test's end) that answers calls in rounds of width: a call is answered
// once the width-th call of its round has come in, so that a round holds
// width connections at once. A round that does not fill within
// roundWait fails the test and its calls are answered 503. It returns
// the server's URL and its count of connections.
func Rounds(t *testing.T, width int) (string, *chaosllm.ConnCounter) {
	t.Helper()
	srv, err := chaosllm.New(chaosllm.Scenario{Keys: []string{GoodKey}}, chaosllm.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	arrived := 0
	full := map[int]chan struct{}{} // closed when round k has all its calls
	join := func() (int, chan struct{}) {
		mu.Lock()
		defer mu.Unlock()
		k := arrived / width
		arrived++
		if full[k] == nil {
			full[k] = make(chan struct{})
		}
		if arrived%width == 0 {
			close(full[k])
		}
		return k, full[k]
	}
	conns := new(chaosllm.ConnCounter)
	hs := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		k, ch := join()
		select {
		case <-ch:
			srv.ServeHTTP(w, r)
		case <-r.Context().Done():
		case <-time.After(roundWait):
			t.Errorf("llmtest.Rounds: round %d did not reach %d calls within %s", k, width, roundWait)
			http.Error(w, "round did not fill", http.StatusServiceUnavailable)
		}
	}))
	hs.Config.ConnState = conns.Count
	hs.Start()
	t.Cleanup(hs.Close)
	return hs.URL, conns
}

// roundWait is how long Rounds waits for a round to fill.
const roundWait = 20 * time.Second
