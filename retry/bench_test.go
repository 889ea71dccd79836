package retry_test

import (
	"math/rand/v2"
	"testing"

	"github.com/agentq/agentq/retry"
)

// The hot-path decisions a worker makes on every failed call. Each must
// stay under a microsecond with no allocation (issue 07).

func BenchmarkClassify(b *testing.B) {
	fs := []retry.Failure{
		{Status: 429, Code: "rate_limit_exceeded"},
		{Status: 529, Type: "overloaded_error"},
		{Status: 400, Type: "invalid_request_error", Message: "prompt is too long: 250000 tokens > 200000 maximum"},
		{Timeout: true},
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if retry.Classify(fs[i&3]) == retry.OK {
			b.Fatal("a failure classified as ok")
		}
		i++
	}
}

func BenchmarkBackoffDelay(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 2))
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if retry.DefaultBackoff.Delay(i%12, r.Float64) <= 0 {
			b.Fatal("no delay")
		}
		i++
	}
}
