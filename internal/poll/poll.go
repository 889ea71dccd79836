// Package poll is how tests wait for something that happens elsewhere (in
// a worker, in Redis, in another process): check a condition until it
// holds or a deadline passes, then fail with what was last seen. It is
// the one loop tests use instead of a sleep.
package poll

import (
	"testing"
	"time"
)

// Interval is how often Until checks.
const Interval = 20 * time.Millisecond

// Until calls cond every Interval until it reports done, and fails the
// test (with cond's last explanation) if that takes longer than timeout.
func Until(tb testing.TB, timeout time.Duration, cond func() (done bool, why string)) {
	tb.Helper()
	deadline := time.Now().Add(timeout)
	for {
		done, why := cond()
		if done {
			return
		}
		if time.Now().After(deadline) {
			tb.Fatalf("not within %s: %s", timeout, why)
		}
		time.Sleep(Interval) // a polling period, not a synchronisation
	}
}
