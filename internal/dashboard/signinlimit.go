package dashboard

import (
	"net"
	"net/http"
	"sync"
	"time"
)

// Failed sign-ins allowed per client address within signInWindow; the
// next attempt from that address gets 429 until the oldest of them is
// signInWindow old.
const (
	signInFailures = 5
	signInWindow   = time.Minute
	// limiterEntries bounds the addresses remembered; past it, the ones
	// without a recent failure are forgotten first.
	limiterEntries = 10000
)

// signInLimiter counts failed sign-ins (the form, or a wrong bearer
// token) per client address on an injected clock.
type signInLimiter struct {
	mu    sync.Mutex
	now   func() time.Time
	fails map[string][]time.Time // oldest first, at most signInFailures
}

func newSignInLimiter(now func() time.Time) *signInLimiter {
	return &signInLimiter{now: now, fails: map[string][]time.Time{}}
}

// recent drops the failures older than the window; the caller holds mu.
func (l *signInLimiter) recent(key string, now time.Time) []time.Time {
	f := l.fails[key]
	for len(f) > 0 && !now.Before(f[0].Add(signInWindow)) {
		f = f[1:]
	}
	if len(f) == 0 {
		delete(l.fails, key)
		return nil
	}
	l.fails[key] = f
	return f
}

// wait is how long the address must wait before it may try again; 0
// when it may try now.
func (l *signInLimiter) wait(addr string) time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	f := l.recent(limiterKey(addr), now)
	if len(f) < signInFailures {
		return 0
	}
	return f[0].Add(signInWindow).Sub(now)
}

// fail records a failed sign-in and returns the address's count within
// the window.
func (l *signInLimiter) fail(addr string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	now, key := l.now(), limiterKey(addr)
	if len(l.fails) >= limiterEntries {
		for k := range l.fails {
			l.recent(k, now)
		}
		for k := range l.fails {
			if len(l.fails) < limiterEntries {
				break
			}
			delete(l.fails, k)
		}
	}
	f := append(l.recent(key, now), now)
	if len(f) > signInFailures {
		f = f[len(f)-signInFailures:]
	}
	l.fails[key] = f
	return len(f)
}

// reset forgets an address's failures after it signed in.
func (l *signInLimiter) reset(addr string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.fails, limiterKey(addr))
}

// limiterKey is the address an IPv4 client is counted under, or the /64
// of an IPv6 one (a host usually holds the whole /64).
func limiterKey(addr string) string {
	ip := net.ParseIP(addr)
	if ip == nil || ip.To4() != nil {
		return addr
	}
	return ip.Mask(net.CIDRMask(64, 128)).String() + "/64"
}

// clientAddr is the connecting address of r, without its port. Behind a
// reverse proxy that is the proxy's: forwarded headers are not trusted.
func clientAddr(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}
