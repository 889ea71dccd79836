package llmclient_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/agentq/agentq/internal/chaosllm"
	"github.com/agentq/agentq/internal/llmtest"
	"github.com/agentq/agentq/llmclient"
)

const goodKey = llmtest.GoodKey

var ask = llmtest.Ask

type fixture struct{ *llmtest.Fixture }

func newFixture(t *testing.T, sc chaosllm.Scenario, keys ...string) fixture {
	return fixture{llmtest.New(t, sc, keys...)}
}

func TestChatSuccess(t *testing.T) {
	f := newFixture(t, chaosllm.Scenario{Keys: []string{goodKey}})
	for ep, p := range f.Providers() {
		t.Run(ep, func(t *testing.T) {
			resp, err := p.Chat(context.Background(), ask("What is two plus two?"))
			if err != nil {
				t.Fatal(err)
			}
			if want := chaosllm.Reply("What is two plus two?\n"); resp.Text != want {
				t.Errorf("text = %q, want %q", resp.Text, want)
			}
			if resp.Usage.PromptTokens != 5 || resp.Usage.CompletionTokens == 0 {
				t.Errorf("usage = %+v", resp.Usage)
			}
			if resp.Provider != p.Name() || resp.Model != "m-1" || resp.RequestID == "" {
				t.Errorf("response = %+v", resp)
			}
			if resp.Key != llmclient.Fingerprint(p.Name(), 0, goodKey) || strings.Contains(resp.Key, goodKey) {
				t.Errorf("key = %q", resp.Key)
			}
			if n := f.Srv.Snapshot().Count(ep, chaosllm.KeyID(goodKey), "ok"); n != 1 {
				t.Errorf("chaosllm counted %d ok calls, want 1", n)
			}
		})
	}
}

// A stream's text comes in pieces as the provider sends them (ordinary
// text is not held back for the redaction of secrets), the whole
// answer's once it ends.
func TestChatStream(t *testing.T) {
	story := strings.Repeat("Once upon a time a stream was read piece by piece. ", 40)
	f := newFixture(t, chaosllm.Scenario{Answers: []chaosllm.Answer{{Match: "story", Text: story}}})
	for ep, p := range f.Providers() {
		t.Run(ep, func(t *testing.T) {
			st, err := p.ChatStream(context.Background(), ask("stream me a story please"))
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			pieces := streamPieces(t, st)
			want := story
			words := len(strings.Fields(want))
			if nonEmpty(pieces) < words || strings.Join(pieces, "") != want {
				t.Errorf("%d pieces of text joining to %d bytes; want %d bytes in a piece a word", nonEmpty(pieces), len(strings.Join(pieces, "")), len(want))
			}
			resp := st.Response()
			if resp == nil || resp.Text != want || resp.Usage.PromptTokens != 5 || resp.Usage.CompletionTokens != len(strings.Fields(want)) {
				t.Errorf("response = %+v", resp)
			}
		})
	}
}

func nonEmpty(pieces []string) int {
	n := 0
	for _, p := range pieces {
		if p != "" {
			n++
		}
	}
	return n
}

func TestStreamStall(t *testing.T) {
	// The whole answer waits 2s before its first byte; a 100ms stall limit
	// must fail the stream as a timeout long before that.
	f := newFixture(t, chaosllm.Scenario{Phases: []chaosllm.Phase{{Latency: chaosllm.Fixed(2 * time.Second)}}})
	for ep, p := range f.Providers() {
		t.Run(ep, func(t *testing.T) {
			req := ask("hello")
			req.StallTimeout = 100 * time.Millisecond
			st, err := p.ChatStream(context.Background(), req)
			if err == nil {
				_, err = st.Collect()
			}
			e, ok := llmclient.AsError(err)
			if !ok || !e.Timeout || !errors.Is(err, llmclient.ErrStreamStalled) {
				t.Fatalf("err = %v, want a stalled-stream timeout", err)
			}
		})
	}
}

func TestErrorsParsed(t *testing.T) {
	cases := []struct {
		name      string
		fault     chaosllm.Fault
		endpoint  string
		status    int
		code, typ string
		retry     time.Duration
	}{
		{"openai 429 rate limit", chaosllm.Fault{Status: 429, RetryAfter: chaosllm.Duration(1500 * time.Millisecond)}, "openai", 429, "rate_limit_exceeded", "requests", 1500 * time.Millisecond},
		{"openai 429 quota", chaosllm.Fault{Status: 429, Code: "insufficient_quota"}, "openai", 429, "insufficient_quota", "insufficient_quota", 0},
		{"openai 503", chaosllm.Fault{Status: 503}, "openai", 503, "", "server_error", 0},
		{"anthropic 429", chaosllm.Fault{Status: 429, RetryAfter: chaosllm.Duration(3 * time.Second)}, "anthropic", 429, "", "rate_limit_error", 3 * time.Second},
		{"anthropic 529", chaosllm.Fault{Status: 529}, "anthropic", 529, "", "overloaded_error", 0},
		{"anthropic 400", chaosllm.Fault{Status: 400}, "anthropic", 400, "", "invalid_request_error", 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			fault := c.fault
			f := newFixture(t, chaosllm.Scenario{Phases: []chaosllm.Phase{{Fault: &fault}}})
			p := f.Providers()[c.endpoint]
			for _, stream := range []bool{false, true} {
				var err error
				if stream {
					var st *llmclient.Stream
					if st, err = p.ChatStream(context.Background(), ask("hi")); err == nil {
						_, err = st.Collect()
					}
				} else {
					_, err = p.Chat(context.Background(), ask("hi"))
				}
				e, ok := llmclient.AsError(err)
				if !ok {
					t.Fatalf("stream=%v: err = %T %v, want *llmclient.Error", stream, err, err)
				}
				if e.Status != c.status || e.Code != c.code || e.Type != c.typ || e.RetryAfter != c.retry {
					t.Errorf("stream=%v: got status=%d code=%q type=%q retry=%s, want %d %q %q %s",
						stream, e.Status, e.Code, e.Type, e.RetryAfter, c.status, c.code, c.typ, c.retry)
				}
				if e.RequestID == "" || e.Body == "" || e.Message == "" {
					t.Errorf("stream=%v: request id %q, body %q, message %q: want all set", stream, e.RequestID, e.Body, e.Message)
				}
				if strings.Contains(e.Error(), goodKey) {
					t.Errorf("error text contains the key: %s", e)
				}
			}
		})
	}
}

func TestBadKeyIsNamedByFingerprint(t *testing.T) {
	bad := "sk-bad-key-that-must-not-leak"
	f := newFixture(t, chaosllm.Scenario{Keys: []string{goodKey}}, bad, goodKey)
	for ep, p := range f.Providers() {
		t.Run(ep, func(t *testing.T) {
			_, err := p.Chat(context.Background(), ask("hi"))
			e, ok := llmclient.AsError(err)
			if !ok || e.Status != 401 {
				t.Fatalf("err = %v, want a 401", err)
			}
			if e.Key != llmclient.Fingerprint(p.Name(), 0, bad) || strings.Contains(e.Error(), bad) {
				t.Errorf("key named %q in %q", e.Key, e.Error())
			}
			// the second key works
			resp, err := p.Chat(llmclient.WithKey(context.Background(), 1), ask("hi"))
			if err != nil || resp.Key != llmclient.Fingerprint(p.Name(), 1, goodKey) {
				t.Fatalf("second key: %v %+v", err, resp)
			}
		})
	}
}

func TestTransportErrors(t *testing.T) {
	f := newFixture(t, chaosllm.Scenario{Phases: []chaosllm.Phase{{Latency: chaosllm.Fixed(5 * time.Second)}}})
	for ep, p := range f.Providers() {
		t.Run(ep+" deadline", func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
			defer cancel()
			_, err := p.Chat(ctx, ask("hi"))
			e, ok := llmclient.AsError(err)
			if !ok || !e.Timeout || e.Status != 0 {
				t.Fatalf("err = %v, want a timeout", err)
			}
		})
	}
	// connection refused: a listener that is closed
	hs := httptest.NewServer(nil)
	url := hs.URL
	hs.Close()
	oa, _ := llmclient.NewProvider("openai", llmclient.Options{Name: "oa", BaseURL: url + "/v1", Keys: []string{goodKey}})
	_, err := oa.Chat(context.Background(), ask("hi"))
	e, ok := llmclient.AsError(err)
	if !ok || e.Status != 0 || e.Timeout || e.Err == nil {
		t.Fatalf("refused: err = %v", err)
	}
}

// A provider that echoes the key in its answer (whole, or across the
// pieces of a stream) has it removed: the text, the pieces and the
// answer's Text hold its fingerprint, never a piece of it.
func TestAnAnswerEchoingTheKeyIsRedacted(t *testing.T) {
	echo := strings.Repeat("filler text before the key. ", 30) + "the key is " + goodKey + " and " + goodKey[:10] + "|" + goodKey[10:] + strings.Repeat(" and after.", 30)
	f := newFixture(t, chaosllm.Scenario{Answers: []chaosllm.Answer{{Match: "key", Text: echo}}})
	clean := func(where, text string) {
		t.Helper()
		for i := 0; i+8 <= len(goodKey); i++ {
			if strings.Contains(text, goodKey[i:i+8]) {
				t.Fatalf("%s holds a piece of the key: %q", where, goodKey[i:i+8])
			}
		}
	}
	for ep, p := range f.Providers() {
		t.Run(ep, func(t *testing.T) {
			resp, err := p.Chat(context.Background(), ask("say the key"))
			if err != nil {
				t.Fatal(err)
			}
			clean("the answer", resp.Text)
			st, err := p.ChatStream(context.Background(), ask("stream the key"))
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			pieces := streamPieces(t, st)
			for _, d := range pieces {
				clean("a piece", d)
			}
			clean("the pieces joined", strings.Join(pieces, ""))
			if got := st.Response().Text; got != strings.Join(pieces, "") || len(pieces) < 2 {
				t.Fatalf("the streamed answer %q is not its %d pieces joined", got, len(pieces))
			}
			clean("the streamed answer", st.Response().Text)
		})
	}
}

// A streamed answer that calls tools carries them whole at its end, on
// both dialects, with the text before them streamed as usual.
func TestAStreamCarriesToolCalls(t *testing.T) {
	f := newFixture(t, chaosllm.Scenario{ToolScript: []chaosllm.ScriptTurn{{Text: "let me look that up", Calls: []chaosllm.ScriptCall{
		{Name: "lookup", Arguments: map[string]any{"city": "Lyon", "days": 3}}, {Name: "clock"}}}}})
	req := ask("weather?")
	req.Tools = []llmclient.Tool{{Name: "lookup", Parameters: map[string]any{"type": "object"}}, {Name: "clock", Parameters: map[string]any{"type": "object"}}}
	for ep, p := range f.Providers() {
		t.Run(ep, func(t *testing.T) {
			st, err := p.ChatStream(context.Background(), req)
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			text := strings.Join(streamPieces(t, st), "")
			resp := st.Response()
			if text != "let me look that up" || resp.Text != text || len(resp.ToolCalls) != 2 {
				t.Fatalf("text %q, response %+v", text, resp)
			}
			var args map[string]any
			if c := resp.ToolCalls[0]; c.Name != "lookup" || c.ID == "" || json.Unmarshal([]byte(c.Arguments), &args) != nil || args["city"] != "Lyon" {
				t.Fatalf("first call %+v", c)
			}
			if c := resp.ToolCalls[1]; c.Name != "clock" || c.ID == "" || c.ID == resp.ToolCalls[0].ID {
				t.Fatalf("second call %+v", c)
			}
		})
	}
}

// streamPieces reads st to its end, failing the test on an error, and
// returns the pieces of text it streamed.
func streamPieces(t *testing.T, st *llmclient.Stream) []string {
	t.Helper()
	var pieces []string
	for {
		d, err := st.Recv()
		if errors.Is(err, io.EOF) {
			return pieces
		}
		if err != nil {
			t.Fatal(err)
		}
		pieces = append(pieces, d)
	}
}
