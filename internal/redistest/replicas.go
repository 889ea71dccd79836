package redistest

import (
	"context"
	"fmt"
	"net"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// Replicated starts a primary and n replicas of it (no persistence), each
// a Server of its own, and returns once every replica is in sync. A test
// cuts a replica off with Freeze (it stops taking the stream: a lagging
// replica) and kills the primary with Kill.
func Replicated(tb testing.TB, n int) (primary *Server, replicas []*Server) {
	tb.Helper()
	primary, replicas, _ = ReplicatedWithLag(tb, n, -1)
	return primary, replicas
}

// ReplicatedWithLag is Replicated with replica lagged (0 to n-1; -1 for
// none) replicating through a LagLink, which it returns (nil for none):
// a test makes that replica lag for real with its Stall.
func ReplicatedWithLag(tb testing.TB, n, lagged int) (primary *Server, replicas []*Server, link *LagLink) {
	tb.Helper()
	primary = NewServer(tb, "--save", "", "--appendonly", "no")
	primary.Start()
	host, port, _ := net.SplitHostPort(primary.Addr())
	for k := range n {
		h, p := host, port
		if k == lagged {
			link = NewLagLink(tb, primary.Addr())
			h, p, _ = net.SplitHostPort(link.Addr())
		}
		r := NewServer(tb, "--save", "", "--appendonly", "no", "--replicaof", h, p)
		r.Start()
		replicas = append(replicas, r)
	}
	WaitReplicas(tb, primary.Addr(), n)
	return primary, replicas, link
}

// WaitReplicas waits (10s at most) until the server at addr has n replicas
// online and in sync: a write there and WAIT n answered by all of them.
func WaitReplicas(tb testing.TB, addr string, n int) {
	tb.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		got, err := inSync(tb.Context(), addr, n)
		if err == nil && got >= int64(n) {
			return
		}
		if time.Now().After(deadline) {
			tb.Fatal(fmt.Errorf("redis at %s: %d of %d replicas in sync after 10s (%v)", addr, got, n, err))
		}
	}
}

// inSync writes a key at addr and reports how many replicas acknowledged
// it within 200ms (WAIT n).
func inSync(ctx context.Context, addr string, n int) (int64, error) {
	c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
	defer c.Close()
	conn := c.Conn() // WAIT counts the acknowledgements of its own connection's writes
	defer conn.Close()
	if err := conn.Set(ctx, "redistest:sync", "1", time.Minute).Err(); err != nil {
		return 0, err
	}
	return conn.Wait(ctx, n, 200*time.Millisecond).Result()
}

// Freeze stops the server's process (SIGSTOP): it keeps its connections
// but reads and answers nothing, as a replica that has fallen behind or a
// primary cut off by a partition. Thaw lets it go on.
func (s *Server) Freeze() { s.signal(syscall.SIGSTOP) }

// Thaw lets a frozen server go on (SIGCONT).
func (s *Server) Thaw() { s.signal(syscall.SIGCONT) }

func (s *Server) signal(sig syscall.Signal) {
	s.tb.Helper()
	if s.cmd == nil {
		s.tb.Fatal("redistest: the server is not running")
	}
	if err := s.cmd.Process.Signal(sig); err != nil {
		s.tb.Fatal(err)
	}
}

// Promote makes the server a primary (REPLICAOF NO ONE), as Sentinel
// does to the replica it elects.
func (s *Server) Promote() {
	s.tb.Helper()
	c := redis.NewClient(&redis.Options{Addr: s.Addr()})
	defer c.Close()
	if err := c.Do(s.tb.Context(), "REPLICAOF", "NO", "ONE").Err(); err != nil {
		s.tb.Fatal(err)
	}
}
