package config

import (
	"strings"
	"testing"
	"time"

	"github.com/agentq/agentq/internal/breaker"
	"github.com/agentq/agentq/retry"
)

// The configuration's defaults are retry's defaults (one place), and its
// policies are checked by retry's own Validate.
func TestDefaultsAreRetrysDefaults(t *testing.T) {
	d := Default()
	if got := d.Resilience.Retry.Backoff(); got != retry.DefaultBackoff {
		t.Errorf("default backoff %+v, retry's is %+v", got, retry.DefaultBackoff)
	}
	if *d.Resilience.Retry.MaxRetries != retry.DefaultMaxRetries {
		t.Errorf("default max_retries %d, retry's is %d", *d.Resilience.Retry.MaxRetries, retry.DefaultMaxRetries)
	}
	want := breaker.DefaultConfig
	if got := d.Resilience.Breaker.Config(want.ProbeTimeout); got != want {
		t.Errorf("default breaker %+v, retry's is %+v", got, want)
	}
	if q, after, err := (Route{HedgeAfter: "p95"}).Hedge(); q != 0.95 || after != 0 || err != nil {
		t.Errorf("hedge p95: %v %v %v", q, after, err)
	}
	if _, after, err := (Route{HedgeAfter: "250ms"}).Hedge(); after != 250*time.Millisecond || err != nil {
		t.Errorf("hedge 250ms: %v %v", after, err)
	}
}

func TestPolicyProblemsNameTheirField(t *testing.T) {
	for _, c := range []struct{ yaml, want string }{
		{"resilience: { retry: { factor: 0.5 } }", "resilience.retry: backoff: factor must be at least 1"},
		{"resilience: { breaker: { error_rate: 2 } }", "resilience.breaker: breaker: error rate must be in (0, 1]"},
		{"routes: { r: { targets: [ { provider: p, model: m } ], hedge_after: soon } }\nproviders: [ { name: p, kind: openai } ]", `routes.r.hedge_after: "soon" is not off, p95, p99 or a duration`},
	} {
		_, err := Load(Input{Path: "c.yaml", Data: []byte(c.yaml), LookupEnv: func(string) (string, bool) { return "", false }})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.yaml, err, c.want)
		}
	}
}
