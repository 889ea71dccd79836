package llmclient_test

import (
	"fmt"
	"net/http"
	"time"

	"github.com/agentq/agentq/llmclient"
)

func ExampleFingerprint() {
	fmt.Println(llmclient.Fingerprint("openai", 1, "sk-not-a-real-key"))
	// Output: openai#2 (…3f7b)
}

func ExampleParseRetryAfter() {
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	for _, h := range []http.Header{
		{"Retry-After": {"7"}},
		{"Retry-After-Ms": {"1500"}, "Retry-After": {"2"}},
		{"Retry-After": {"Mon, 30 Nov 2026 12:00:30 GMT"}},
		{"Retry-After": {"3600"}},
	} {
		fmt.Println(llmclient.ParseRetryAfter(h, now))
	}
	// Output:
	// 7s
	// 1.5s
	// 30s
	// 10m0s
}
