package breaker_test

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/agentq/agentq/internal/breaker"
)

// A breaker's transitions run on every failed call: each must stay under a
// microsecond with no allocation.

func BenchmarkBreakerTransitions(b *testing.B) {
	c := breaker.DefaultConfig
	now := time.Unix(1_700_000_000, 0)
	r := rand.New(rand.NewPCG(1, 2))
	b.ReportAllocs()
	var br breaker.Breaker
	for b.Loop() {
		switch br.Allow(now) {
		case breaker.Pass:
			br = br.OnFailure(now, c, breaker.Window{Calls: 20, Failures: 20}, r.Float64)
		case breaker.Probe:
			br = br.StartProbe(now, c).OnSuccess()
		case breaker.Deny:
			now = br.OpenUntil
		}
	}
}
