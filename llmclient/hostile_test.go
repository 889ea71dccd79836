package llmclient_test

import (
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/agentq/agentq/internal/chaosllm"
	"github.com/agentq/agentq/internal/llmtest"
	"github.com/agentq/agentq/llmclient"
	"github.com/agentq/agentq/redact"
	"github.com/agentq/agentq/retry"
)

// otherSecret stands for a secret the adapter does not own (the Redis
// password, the dashboard token): the process-wide redactor removes it too.
const otherSecret = "redis-pass-0f1e2d3c4b5a"

// hostileFixture is chaosllm plus both adapters with a bounded answer size
// and the process's redactor.
func hostileFixture(t *testing.T, f chaosllm.Fault, key string, maxAnswer int64) map[string]llmclient.Provider {
	t.Helper()
	srv, err := chaosllm.New(chaosllm.Scenario{Phases: []chaosllm.Phase{{Fault: &f}}}, chaosllm.Options{})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv)
	t.Cleanup(hs.Close)
	o := llmclient.Options{Keys: []string{key}, MaxResponseBytes: maxAnswer, Redactor: redact.New(otherSecret)}
	o.Name, o.BaseURL = "oa", hs.URL+"/v1"
	oa, err := llmclient.NewProvider("openai", o)
	if err != nil {
		t.Fatal(err)
	}
	o.Name, o.BaseURL = "an", hs.URL
	an, err := llmclient.NewProvider("anthropic", o)
	if err != nil {
		t.Fatal(err)
	}
	return map[string]llmclient.Provider{"openai": oa, "anthropic": an}
}

// leak returns the first 8-byte piece of secret in text, or "".
func leak(text, secret string) string {
	for i := 0; i+8 <= len(secret); i++ {
		if strings.Contains(text, secret[i:i+8]) {
			return secret[i : i+8]
		}
	}
	return ""
}

// everyText is every string an *Error carries out of the adapter.
func everyText(err error) string {
	e, ok := llmclient.AsError(err)
	if !ok {
		return fmt.Sprint(err)
	}
	return strings.Join([]string{err.Error(), fmt.Sprintf("%v %+v", err, *e), e.Body, e.Message, e.Code, e.Type, e.RequestID, fmt.Sprint(e.Err)}, "\n")
}

// A gateway's text/plain 401 echoes the key (the defect: the SDK's error
// text embedded the raw body and reached logs, Redis and pages). Wherever
// the filler puts the key, across the 512-byte excerpt cut included, no
// 8-byte piece of it leaves the adapter, and the class is still auth.
func TestNonJSONErrorBodyNeverLeaksTheKey(t *testing.T) {
	key := "sk-proj-Lk3vQ9zX7mN2pR5tY8wB1cD4fG6hJ0aS"
	for _, pad := range []int{0, 400, 470, 480, 485, 490, 495, 500, 505, 510, 511, 512, 600, 2000, 2030, 70000} {
		for _, msg := range []string{"", "Unauthorized: " + otherSecret + " rejected, key"} {
			f := chaosllm.Fault{Kind: chaosllm.KindTextEcho, Pad: pad, Message: msg}
			for ep, p := range hostileFixture(t, f, key, 0) {
				for _, stream := range []bool{false, true} {
					err := call(p, stream, 10*time.Second)
					if got := retry.ClassOf(err); got != retry.Auth {
						t.Errorf("%s pad %d stream=%v: class %s, want auth (%v)", ep, pad, stream, got, err)
					}
					text := everyText(err)
					for _, s := range []string{key, otherSecret} {
						if l := leak(text, s); l != "" {
							t.Errorf("%s pad %d stream=%v: %q of a secret leaves the adapter: %s", ep, pad, stream, l, text)
						}
					}
					if len(err.Error()) > 4<<10 {
						t.Errorf("%s pad %d: error text is %d bytes", ep, pad, len(err.Error()))
					}
				}
			}
		}
	}
}

// A huge error body is cut at 64 KiB with an early EOF, so the SDKs still
// report the status: a 429 stays rate_limited, a 401 auth, a 500 server;
// what the error carries stays small.
func TestHugeErrorBodyKeepsItsClass(t *testing.T) {
	for _, c := range []struct {
		status int
		class  retry.Class
	}{{429, retry.RateLimited}, {401, retry.Auth}, {500, retry.Server}, {400, retry.BadRequest}} {
		f := chaosllm.Fault{Kind: chaosllm.KindHuge, Status: c.status, Size: 8 << 20}
		for ep, p := range hostileFixture(t, f, goodKey, 0) {
			for _, stream := range []bool{false, true} {
				err := call(p, stream, 20*time.Second)
				if got := retry.ClassOf(err); got != c.class {
					t.Errorf("%s %d stream=%v: class %s, want %s (%.300v)", ep, c.status, stream, got, c.class, err)
				}
				if e, _ := llmclient.AsError(err); e == nil || len(err.Error()) > 4<<10 || len(e.Body) > 600 || len(e.Message) > 600 {
					t.Errorf("%s %d stream=%v: the error carries too much: %d bytes of text", ep, c.status, stream, len(err.Error()))
				}
			}
		}
	}
}

// A 2xx answer (or stream) that never ends fails with response_too_large
// (class server) once MaxResponseBytes are read, instead of buffering until
// the machine runs out of memory; a never-ending error body ends at 64 KiB
// and keeps its class.
func TestEndlessBodiesAreBounded(t *testing.T) {
	for _, c := range []struct {
		status int
		typ    string
	}{{0, llmclient.TypeTooLarge}, {503, ""}} {
		f := chaosllm.Fault{Kind: chaosllm.KindEndless, Status: c.status}
		for ep, p := range hostileFixture(t, f, goodKey, 1<<20) {
			for _, stream := range []bool{false, true} {
				err := call(p, stream, 30*time.Second)
				e, ok := llmclient.AsError(err)
				if !ok || e.Timeout || retry.ClassOf(err) != retry.Server {
					t.Fatalf("%s %d stream=%v: %.300v (class %s), want a server failure before the deadline", ep, c.status, stream, err, retry.ClassOf(err))
				}
				if e.Type != c.typ && c.typ != "" {
					t.Errorf("%s %d stream=%v: type %q, want %q", ep, c.status, stream, e.Type, c.typ)
				}
				if e, _ := llmclient.AsError(err); e == nil || len(err.Error()) > 4<<10 || len(e.Body) > 600 || len(e.Message) > 600 {
					t.Errorf("%s %d stream=%v: the error carries too much: %d bytes of text", ep, c.status, stream, len(err.Error()))
				}
			}
		}
	}
}

// An answer with nothing in it is the same failure on both dialects and
// both ways of calling: empty_response, class server.
func TestEmptyAnswerIsAServerFailureOnBothDialects(t *testing.T) {
	for ep, p := range hostileFixture(t, chaosllm.Fault{Kind: chaosllm.KindEmptyAnswer}, goodKey, 0) {
		for _, stream := range []bool{false, true} {
			err := call(p, stream, 10*time.Second)
			e, ok := llmclient.AsError(err)
			if !ok || e.Type != llmclient.TypeEmpty || retry.ClassOf(err) != retry.Server {
				t.Errorf("%s stream=%v: %v, want an empty_response server failure", ep, stream, err)
			}
		}
	}
}

// The model a provider says answered is text it sends like any other: a
// key it echoes there reads as the key's fingerprint in the Response
// (and so in the LLM call span that carries it), on both dialects.
func TestTheAnsweringModelNeverCarriesTheKey(t *testing.T) {
	key := "sk-live-0123456789abcdefghijklmn"
	fx := llmtest.New(t, chaosllm.Scenario{}, key)
	for dialect, p := range fx.Providers() {
		req := llmtest.Ask("hello")
		req.Model = "m-" + key // chaosllm answers naming the model it was asked for
		resp, err := p.Chat(t.Context(), req)
		if err != nil {
			t.Fatalf("%s: %v", dialect, err)
		}
		if resp.ResponseModel == "" || leak(resp.ResponseModel, key) != "" {
			t.Errorf("%s: the answering model %q (want it named, the key's pieces gone)", dialect, resp.ResponseModel)
		}
	}
}
