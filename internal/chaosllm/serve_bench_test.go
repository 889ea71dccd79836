package chaosllm

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// BenchmarkAnswer is what the server spends on one answered call, past
// the HTTP stack: the request parsed, the answer chosen and encoded.
func BenchmarkAnswer(b *testing.B) {
	for _, c := range []struct{ name, path, body string }{
		{"openai", "/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":"call 42"}]}`},
		{"anthropic", "/v1/messages", `{"model":"m","max_tokens":64,"messages":[{"role":"user","content":"call 42"}]}`},
	} {
		b.Run(c.name, func(b *testing.B) {
			srv, err := New(Scenario{}, Options{})
			if err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			for b.Loop() {
				w := httptest.NewRecorder()
				r := httptest.NewRequest(http.MethodPost, c.path, strings.NewReader(c.body))
				r.Header.Set("Authorization", "Bearer k")
				r.Header.Set("x-api-key", "k")
				srv.ServeHTTP(w, r)
				if w.Code != http.StatusOK {
					b.Fatalf("%d: %s", w.Code, w.Body)
				}
			}
		})
	}
}
