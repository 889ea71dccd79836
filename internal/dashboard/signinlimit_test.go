package dashboard

import (
	"fmt"
	"testing"
	"time"
)

// IPv6 clients are counted by their /64; IPv4 ones by address; the
// addresses remembered stay bounded.
func TestSignInLimiterKeysAndBound(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	l := newSignInLimiter(func() time.Time { return now })
	for i := range signInFailures {
		l.fail(fmt.Sprintf("2001:db8:1:2::%x", i+1))
	}
	if l.wait("2001:db8:1:2:ffff::1") == 0 {
		t.Error("another address of the same /64 is not limited")
	}
	if l.wait("2001:db8:1:3::1") != 0 || l.wait("192.0.2.1") != 0 {
		t.Error("another /64 or an IPv4 address is limited")
	}
	for i := range signInFailures - 1 {
		l.fail(fmt.Sprintf("192.0.2.%d", i+1))
	}
	if l.wait("192.0.2.1") != 0 {
		t.Error("IPv4 addresses share a count")
	}
	for i := range limiterEntries + 10 {
		l.fail(fmt.Sprintf("198.51.%d.%d", i/256, i%256))
	}
	if n := len(l.fails); n > limiterEntries {
		t.Errorf("%d addresses remembered, bound %d", n, limiterEntries)
	}
}
