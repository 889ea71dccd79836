package mcptool

import (
	"context"
	"fmt"
	"time"

	"github.com/agentq/agentq/internal/config"
	"github.com/agentq/agentq/internal/router"
	"github.com/agentq/agentq/retry"
)

// serverBreaker is a server's circuit breaker: the providers' breakers
// (resilience.breaker's rules), under the server's shared name
// (config.MCPBreaker), so every worker of a fleet sees it open and the
// dashboard shows it. Failures to reach the server or to answer in time
// open it; while it is open a call fails at once (class network) instead
// of waiting for a server that is down; past its cooldown one call of the
// fleet probes.
type serverBreaker struct {
	b    *router.Breakers // nil: none (every call is sent)
	name string           // the shared name
}

func newServerBreaker(b *router.Breakers, server string) serverBreaker {
	return serverBreaker{b: b, name: config.MCPBreaker(server)}
}

// allow reports whether a call may go, and whether it is the probe.
func (s serverBreaker) allow(ctx context.Context) (ok, probe bool) {
	if s.b == nil {
		return true, false
	}
	return s.b.Allow(ctx, s.name, "")
}

// record feeds a call's outcome: err nil or the server's answer (a
// protocol error, a message too large) counts for the server; unreachable
// or timed out against it; anything else (canceled) not at all (a probe
// gives its slot back).
func (s serverBreaker) record(ctx context.Context, err error, probe bool) {
	if s.b == nil {
		return
	}
	class := retry.Canceled
	switch {
	case err == nil || isTooLarge(err) || isProtocol(err):
		class = retry.OK
	case isUnreachable(err):
		class = retry.Network
	case isTimeout(err):
		class = retry.Timeout
	}
	s.b.Record(context.WithoutCancel(ctx), s.name, "", class, probe)
}

// openError is a call the open breaker refused.
func (s serverBreaker) openError(server string) error {
	until := s.b.Get(s.name, "").OpenUntil
	return &unreachable{server: server, msg: fmt.Sprintf("its breaker is open after failures to reach it; the next try is in %s", max(time.Until(until), 0).Round(time.Millisecond))}
}
