package llmclient_test

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentq/agentq/internal/chaosllm"
	"github.com/agentq/agentq/llmclient"
)

// A worker's calls to one provider reuse their connections: two rounds of
// 20 concurrent calls open 20 connections, not 20 more each round (Go's
// default transport keeps 2 idle connections per host, and a body closed
// before its end is not reused: every call past the second would dial, and
// against a real provider shake hands over TLS, again).
func TestConcurrentCallsReuseTheirConnections(t *testing.T) {
	const width = 20
	adapters := map[string]func(url string) (llmclient.Provider, error){
		"openai": func(url string) (llmclient.Provider, error) {
			return llmclient.NewProvider("openai", llmclient.Options{Name: "oa", BaseURL: url + "/v1", Keys: []string{goodKey}})
		},
		"anthropic": func(url string) (llmclient.Provider, error) {
			return llmclient.NewProvider("anthropic", llmclient.Options{Name: "an", BaseURL: url, Keys: []string{goodKey}})
		},
	}
	for name, build := range adapters {
		t.Run(name, func(t *testing.T) {
			url, dialed := countedChaos(t)
			p, err := build(url)
			if err != nil {
				t.Fatal(err)
			}
			for round := range 3 {
				var wg sync.WaitGroup
				errs := make(chan error, width)
				for range width {
					wg.Go(func() {
						if _, err := p.Chat(context.Background(), ask("hello")); err != nil {
							errs <- err
						}
					})
				}
				wg.Wait()
				close(errs)
				for err := range errs {
					t.Fatalf("round %d: %v", round, err)
				}
			}
			// a connection goes back to the pool just after its call
			// returns: a few of the next round's may still dial
			if n := dialed.Load(); n < width || n > width+width/4 {
				t.Errorf("3 rounds of %d concurrent calls opened %d connections, want about %d", width, n, width)
			}
		})
	}
}

// countedChaos is a chaosllm server over real HTTP that answers after 50ms
// (so that calls overlap) and counts the connections opened to it.
func countedChaos(t *testing.T) (string, *atomic.Int32) {
	srv, err := chaosllm.New(chaosllm.Scenario{Keys: []string{goodKey}, Phases: []chaosllm.Phase{{
		Latency: chaosllm.Latency{Min: chaosllm.Duration(50 * time.Millisecond), Max: chaosllm.Duration(50 * time.Millisecond)}}}}, chaosllm.Options{})
	if err != nil {
		t.Fatal(err)
	}
	dialed := new(atomic.Int32)
	hs := httptest.NewUnstartedServer(srv)
	hs.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			dialed.Add(1)
		}
	}
	hs.Start()
	t.Cleanup(hs.Close)
	return hs.URL, dialed
}

// countingTransport counts the requests it carries for the one under it.
type countingTransport struct {
	base http.RoundTripper
	n    atomic.Int32
}

func (c *countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	c.n.Add(1)
	return c.base.RoundTrip(r)
}

// A program that puts its own transport in http.DefaultTransport's place
// (tracing, a proxy) has the adapters built without one use it as it is.
func TestAReplacedDefaultTransportIsUsed(t *testing.T) {
	url, _ := countedChaos(t)
	own := &countingTransport{base: http.DefaultTransport}
	http.DefaultTransport = own
	defer func() { http.DefaultTransport = own.base }()
	p, err := llmclient.NewProvider("openai", llmclient.Options{Name: "oa", BaseURL: url + "/v1", Keys: []string{goodKey}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Chat(context.Background(), ask("hello")); err != nil {
		t.Fatal(err)
	}
	if n := own.n.Load(); n != 1 {
		t.Fatalf("the program's transport carried %d requests, want 1", n)
	}
}
