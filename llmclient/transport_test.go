package llmclient_test

import (
	"context"
	"crypto/x509"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentq/agentq/internal/chaosllm"
	"github.com/agentq/agentq/internal/llmtest"
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
				chatAtOnce(t, p, width, fmt.Sprintf("round %d", round))
			}
			// a connection goes back to the pool just after its call
			// returns: a few of the next round's may still dial
			if n := dialed.Opened(); n < width || n > width+width/4 {
				t.Errorf("3 rounds of %d concurrent calls opened %d connections, want about %d", width, n, width)
			}
		})
	}
}

// A worker wider than the shared pool's 256 idle connections per host
// (IdleConnsPerHost: its concurrency) keeps one for each of its calls:
// three rounds of 400 calls in flight together to a plain HTTP/1.1
// endpoint (a local model's) open 400 connections; with the pool at 256
// each round after the first finds 256 idle and dials 144 (688 in all).
// The server answers a round's calls only once all 400 are in, so that
// every round holds 400 connections at once.
func TestAWideWorkersCallsReuseTheirConnections(t *testing.T) {
	const width = 400
	for _, c := range []struct {
		idle     int
		min, max int64
	}{
		{idle: width, min: width, max: width + width/4},
		{idle: 0, min: width + 2*(width-256), max: 3 * width},
	} {
		t.Run(fmt.Sprintf("idle %d", c.idle), func(t *testing.T) {
			url, dialed := llmtest.Rounds(t, width)
			p, err := llmclient.NewProvider("openai", llmclient.Options{Name: "oa", BaseURL: url + "/v1", Keys: []string{goodKey}, IdleConnsPerHost: c.idle})
			if err != nil {
				t.Fatal(err)
			}
			for round := range 3 {
				chatAtOnce(t, p, width, fmt.Sprintf("round %d", round))
			}
			if n := dialed.Opened(); n < c.min || n > c.max {
				t.Errorf("3 rounds of %d calls in flight together with IdleConnsPerHost %d opened %d connections, want %d to %d", width, c.idle, n, c.min, c.max)
			}
		})
	}
	// a size past the bound is kept at the bound, not wrapped around (four
	// times it is the pool's size across hosts)
	url, dialed := llmtest.Rounds(t, 20)
	p, err := llmclient.NewProvider("openai", llmclient.Options{Name: "oa", BaseURL: url + "/v1", Keys: []string{goodKey}, IdleConnsPerHost: math.MaxInt})
	if err != nil {
		t.Fatal(err)
	}
	for round := range 3 {
		chatAtOnce(t, p, 20, fmt.Sprintf("IdleConnsPerHost MaxInt, round %d", round))
	}
	if n := dialed.Opened(); n < 20 || n > 25 {
		t.Errorf("3 rounds of 20 calls with IdleConnsPerHost MaxInt opened %d connections, want about 20", n)
	}
	if _, err := llmclient.NewProvider("openai", llmclient.Options{Name: "oa", Keys: []string{goodKey}, IdleConnsPerHost: -1}); err == nil || !strings.Contains(err.Error(), "idle connections per host") {
		t.Errorf("a negative IdleConnsPerHost: %v, want an error naming it", err)
	}
}

// chatAtOnce makes width calls of p at once, failing on any error (what
// names the round).
func chatAtOnce(t *testing.T, p llmclient.Provider, width int, what string) {
	t.Helper()
	llmtest.AtOnce(t, width, what, func() error {
		_, err := p.Chat(context.Background(), ask("hello"))
		return err
	})
}

// countedChaos is a chaosllm server over real HTTP that answers after 50ms
// (so that calls overlap) and counts the connections opened to it.
func countedChaos(t *testing.T) (string, *chaosllm.ConnCounter) {
	srv, err := chaosllm.New(chaosllm.Scenario{Keys: []string{goodKey}, Phases: []chaosllm.Phase{{
		Latency: chaosllm.Latency{Min: chaosllm.Duration(50 * time.Millisecond), Max: chaosllm.Duration(50 * time.Millisecond)}}}}, chaosllm.Options{})
	if err != nil {
		t.Fatal(err)
	}
	dialed := new(chaosllm.ConnCounter)
	hs := httptest.NewUnstartedServer(srv)
	hs.Config.ConnState = dialed.Count
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

// A provider behind a certificate authority of its own (RootCAs) is
// reached over HTTPS, and its concurrent calls share HTTP/2 connections
// (a connection and its two goroutines per call in flight is what
// HTTP/1.1 costs); without the authority the call fails and names it.
func TestAProviderBehindItsOwnCAIsReachedOverHTTP2(t *testing.T) {
	const width = 20
	srv, err := chaosllm.New(chaosllm.Scenario{Keys: []string{goodKey}, Phases: []chaosllm.Phase{{
		Latency: chaosllm.Latency{Min: chaosllm.Duration(50 * time.Millisecond), Max: chaosllm.Duration(50 * time.Millisecond)}}}}, chaosllm.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var h2, other atomic.Int32
	var dialed chaosllm.ConnCounter
	hs := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ProtoMajor == 2 {
			h2.Add(1)
		} else {
			other.Add(1)
		}
		srv.ServeHTTP(w, r)
	}))
	hs.EnableHTTP2 = true
	hs.Config.ConnState = dialed.Count
	hs.StartTLS()
	t.Cleanup(hs.Close)
	roots := x509.NewCertPool()
	roots.AddCert(hs.Certificate())
	for name, base := range map[string]string{"openai": hs.URL + "/v1", "anthropic": hs.URL} {
		p, err := llmclient.NewProvider(name, llmclient.Options{Name: name, BaseURL: base, Keys: []string{goodKey}, RootCAs: roots})
		if err != nil {
			t.Fatal(err)
		}
		// the first call's connection carries the next calls, all at once
		// (calls that start together before any connection is up dial one
		// each, as net/http does)
		if _, err := p.Chat(context.Background(), ask("hello")); err != nil {
			t.Fatalf("%s over HTTPS with its CA: %v", name, err)
		}
		chatAtOnce(t, p, width, name+" over HTTPS with its CA")
		stranger, _ := llmclient.NewProvider(name, llmclient.Options{Name: name, BaseURL: base, Keys: []string{goodKey}})
		if _, err := stranger.Chat(context.Background(), ask("hello")); err == nil || !strings.Contains(err.Error(), "certificate") {
			t.Fatalf("%s without the CA: %v, want a certificate error", name, err)
		}
	}
	if h2.Load() != 2*(width+1) || other.Load() != 0 {
		t.Fatalf("%d calls over HTTP/2 and %d over HTTP/1, want all %d over HTTP/2", h2.Load(), other.Load(), 2*(width+1))
	}
	if n := dialed.Opened(); n != 4 {
		t.Fatalf("two adapters' calls, %d at once each, opened %d connections, want one each and the two refused handshakes", width, n)
	}
}

// A connection's buffers are smaller than a call (connReadBuffer and
// connWriteBuffer): a long prompt reaches the provider whole and a long
// answer with headers longer than the buffers comes back whole, over
// each adapter.
func TestLongPromptsAndAnswersPassThePoolsSmallBuffers(t *testing.T) {
	prompt := strings.Repeat("p", 96<<10)
	answer := strings.Repeat("a", 256<<10)
	header := strings.Repeat("h", 8<<10)
	replies := map[string]string{
		"openai":    `{"id":"c1","object":"chat.completion","model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"` + answer + `"},"finish_reason":"stop"}],"usage":{"prompt_tokens":1,"completion_tokens":1}}`,
		"anthropic": `{"id":"msg_1","type":"message","role":"assistant","model":"m","content":[{"type":"text","text":"` + answer + `"}],"stop_reason":"end_turn","usage":{"input_tokens":1,"output_tokens":1}}`,
	}
	for name, reply := range replies {
		t.Run(name, func(t *testing.T) {
			var got atomic.Int64
			hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				b, err := io.ReadAll(r.Body)
				if err != nil {
					t.Errorf("reading the request: %v", err)
				}
				got.Store(int64(strings.Count(string(b), "p")))
				w.Header().Set("Content-Type", "application/json")
				w.Header().Set("X-Long", header)
				fmt.Fprint(w, reply)
			}))
			resp, err := providerAt(t, name, hs).Chat(context.Background(), ask(prompt))
			if err != nil {
				t.Fatal(err)
			}
			if n := got.Load(); n < int64(len(prompt)) {
				t.Errorf("the provider got %d of the prompt's %d bytes", n, len(prompt))
			}
			if resp.Text != answer {
				t.Errorf("the answer came back %d bytes long, want %d", len(resp.Text), len(answer))
			}
		})
	}
}

// A streamed answer whose events are longer than a connection's buffers
// (a 64 KiB text delta, an 8 KiB header line) comes back whole over each
// adapter: the SDKs split the stream into lines with readers of their own.
func TestLongStreamedEventsPassThePoolsSmallBuffers(t *testing.T) {
	answer := strings.Repeat("a", 64<<10)
	header := strings.Repeat("h", 8<<10)
	events := map[string][]string{
		"openai": {
			`data: {"id":"c1","object":"chat.completion.chunk","model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":"` + answer + `"}}]}`,
			`data: {"id":"c1","object":"chat.completion.chunk","model":"m","choices":[{"index":0,"delta":{},"finish_reason":"stop"}],"usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2}}`,
			`data: [DONE]`,
		},
		"anthropic": {
			"event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"m\",\"content\":[],\"usage\":{\"input_tokens\":1,\"output_tokens\":0}}}",
			"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}",
			"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"" + answer + "\"}}",
			"event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}",
			"event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"},\"usage\":{\"output_tokens\":1}}",
			"event: message_stop\ndata: {\"type\":\"message_stop\"}",
		},
	}
	for name, evs := range events {
		t.Run(name, func(t *testing.T) {
			hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if _, err := io.Copy(io.Discard, r.Body); err != nil {
					t.Errorf("reading the request: %v", err)
				}
				w.Header().Set("Content-Type", "text/event-stream")
				w.Header().Set("X-Long", header)
				for _, e := range evs {
					fmt.Fprint(w, e+"\n\n")
					w.(http.Flusher).Flush()
				}
			}))
			st, err := providerAt(t, name, hs).ChatStream(context.Background(), ask("hi"))
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			if got := strings.Join(streamPieces(t, st), ""); got != answer {
				t.Errorf("the streamed answer came back %d bytes long, want %d", len(got), len(answer))
			}
		})
	}
}

// providerAt is the adapter name ("openai" or "anthropic") built without a
// transport against hs, which it closes when the test ends.
func providerAt(t *testing.T, name string, hs *httptest.Server) llmclient.Provider {
	t.Helper()
	t.Cleanup(hs.Close)
	base := hs.URL
	if name == "openai" {
		base += "/v1"
	}
	p, err := llmclient.NewProvider(name, llmclient.Options{Name: name, BaseURL: base, Keys: []string{goodKey}})
	if err != nil {
		t.Fatal(err)
	}
	return p
}
