package retry_test

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/agentq/agentq/retry"
)

func TestClassify(t *testing.T) {
	cases := []struct {
		f    retry.Failure
		want retry.Class
	}{
		{retry.Failure{}, retry.Network},
		{retry.Failure{Timeout: true}, retry.Timeout},
		{retry.Failure{Canceled: true, Timeout: true}, retry.Canceled},
		{retry.Failure{Status: 500}, retry.Server},
		{retry.Failure{Status: 502}, retry.Server},
		{retry.Failure{Status: 503}, retry.Server},
		{retry.Failure{Status: 504}, retry.Server},
		{retry.Failure{Status: 529, Type: "overloaded_error"}, retry.Server},
		{retry.Failure{InStream: true, Type: "overloaded_error"}, retry.Server},
		{retry.Failure{InStream: true}, retry.Network},
		{retry.Failure{Status: 429, Code: "rate_limit_exceeded"}, retry.RateLimited},
		{retry.Failure{Status: 429, Type: "rate_limit_error"}, retry.RateLimited},
		{retry.Failure{Status: 429, Code: "insufficient_quota", Type: "insufficient_quota"}, retry.Quota},
		{retry.Failure{Status: 401}, retry.Auth},
		{retry.Failure{Status: 403, Type: "permission_error"}, retry.Auth},
		{retry.Failure{Status: 400}, retry.BadRequest},
		{retry.Failure{Status: 422}, retry.BadRequest},
		{retry.Failure{Status: 400, Code: "context_length_exceeded"}, retry.ContextLength},
		{retry.Failure{Status: 400, Type: "invalid_request_error", Message: "prompt is too long: 250000 tokens > 200000 maximum"}, retry.ContextLength},
		{retry.Failure{Status: 400, Code: "content_filter"}, retry.ContentFilter},
		{retry.Failure{Status: 404, Code: "model_not_found"}, retry.NotFound},
	}
	for _, c := range cases {
		if got := retry.Classify(c.f); got != c.want {
			t.Errorf("Classify(%+v) = %s, want %s", c.f, got, c.want)
		}
	}
}

func FuzzClassify(f *testing.F) {
	f.Add(429, "insufficient_quota", "", "", false, false, false)
	f.Add(0, "", "overloaded_error", "", false, false, true)
	f.Fuzz(func(t *testing.T, status int, code, typ, msg string, timeout, canceled, inStream bool) {
		c := retry.Classify(retry.Failure{Status: status, Code: code, Type: typ, Message: msg, Timeout: timeout, Canceled: canceled, InStream: inStream})
		if c == "" || c == retry.OK {
			t.Fatalf("a failure classified as %q", c)
		}
		if canceled && c != retry.Canceled {
			t.Fatalf("canceled call classified as %s", c)
		}
	})
}

func TestBackoffSchedule(t *testing.T) {
	b := retry.DefaultBackoff
	mid := func() float64 { return 0.5 } // jitter exactly 1.0
	want := []time.Duration{1 * time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 16 * time.Second,
		32 * time.Second, 64 * time.Second, 128 * time.Second, 256 * time.Second, 300 * time.Second, 300 * time.Second}
	for n, w := range want {
		if got := b.Delay(n, mid); got != w {
			t.Errorf("Delay(%d) = %s, want %s", n, got, w)
		}
	}
	if got := b.Delay(10000, mid); got != 5*time.Minute {
		t.Errorf("Delay(10000) = %s, want the cap", got)
	}
}

func TestBackoffJitterBounds(t *testing.T) {
	b := retry.DefaultBackoff
	r := rand.New(rand.NewPCG(1, 2))
	for n := 0; n < 12; n++ {
		base := b.Delay(n, func() float64 { return 0.5 })
		lo, hi := time.Duration(float64(base)*0.5), time.Duration(float64(base)*1.5)
		for i := 0; i < 200; i++ {
			if d := b.Delay(n, r.Float64); d < lo || d >= hi {
				t.Fatalf("Delay(%d) = %s outside [%s, %s)", n, d, lo, hi)
			}
		}
	}
}

func ExampleBackoff_Delay() {
	b := retry.Backoff{Base: time.Second, Factor: 2, Max: time.Minute, JitterLow: 0.5, JitterHigh: 1.5}
	noJitter := func() float64 { return 0.5 }
	for n := 0; n < 8; n++ {
		fmt.Print(b.Delay(n, noJitter), " ")
	}
	// Output: 1s 2s 4s 8s 16s 32s 1m0s 1m0s
}
