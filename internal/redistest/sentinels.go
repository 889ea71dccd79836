package redistest

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/agentq/agentq/internal/poll"
)

// Sentinels is a Sentinel deployment for a failover drill: a primary,
// its replicas and three sentinels watching it as MasterName, quorum 2,
// a primary that does not answer for a second judged down.
type Sentinels struct {
	MasterName string
	Primary    *Server
	Replicas   []*Server
	Addrs      []string // the sentinels
}

// StartSentinels starts a primary with n replicas (no persistence) and
// three sentinels, and returns once the sentinels know every replica and
// the replicas are in sync. Without redis-server the test is skipped, or
// failed under CI=true. Everything stops at the end of the test.
func StartSentinels(tb testing.TB, n int) *Sentinels {
	tb.Helper()
	s, _ := StartSentinelsWithLag(tb, n, -1)
	return s
}

// StartSentinelsWithLag is StartSentinels with replica lagged (0 to n-1;
// -1 for none) replicating through the LagLink it returns
// (ReplicatedWithLag). The sentinels still know that replica by its own
// port (the primary's INFO names it so) and may promote it. Its
// replication address is the link's, not the primary's, which Sentinel
// sets right (REPLICAOF the primary) once failover-timeout has passed
// since it saw it: with a lagging replica that timeout is a minute, not
// 10s, so that the link stays in place through a drill.
func StartSentinelsWithLag(tb testing.TB, n, lagged int) (*Sentinels, *LagLink) {
	tb.Helper()
	bin := need(tb, "the Sentinel drill", "redis-server")[0]
	primary, replicas, link := ReplicatedWithLag(tb, n, lagged)
	failoverTimeout := "10000"
	if link != nil {
		failoverTimeout = "60000"
	}
	s := &Sentinels{MasterName: "agentq", Primary: primary, Replicas: replicas}
	host, port, _ := net.SplitHostPort(primary.Addr())
	for i := range 3 {
		conf := filepath.Join(tb.TempDir(), fmt.Sprintf("sentinel-%d.conf", i))
		text := "sentinel monitor agentq " + host + " " + port + " 2\n" +
			"sentinel down-after-milliseconds agentq 1000\n" +
			"sentinel failover-timeout agentq " + failoverTimeout + "\n" +
			"sentinel parallel-syncs agentq 2\n"
		if err := os.WriteFile(conf, []byte(text), 0o600); err != nil {
			tb.Fatal(err)
		}
		s.Addrs = append(s.Addrs, startTestServer(tb, bin, conf, "--sentinel"))
	}
	for _, a := range s.Addrs {
		s.waitSentinel(tb, a, func(c *redis.SentinelClient) bool {
			r, err := c.Replicas(tb.Context(), s.MasterName).Result()
			o, err2 := c.Sentinels(tb.Context(), s.MasterName).Result()
			return err == nil && err2 == nil && len(r) == n && len(o) == 2
		}, fmt.Sprintf("know the %d replicas and the other 2 sentinels", n))
	}
	return s, link
}

// Master is the primary's address as the first sentinel that answers
// names it.
func (s *Sentinels) Master(tb testing.TB) string {
	tb.Helper()
	for _, a := range s.Addrs {
		c := redis.NewSentinelClient(&redis.Options{Addr: a})
		m, err := c.GetMasterAddrByName(tb.Context(), s.MasterName).Result()
		c.Close()
		if err == nil && len(m) == 2 {
			return net.JoinHostPort(m[0], m[1])
		}
	}
	return ""
}

// WaitPromotion waits (limit at most) until the sentinels name a primary
// other than old, and returns it.
func (s *Sentinels) WaitPromotion(tb testing.TB, old string, limit time.Duration) string {
	tb.Helper()
	var m string
	poll.Until(tb, limit, func() (bool, string) {
		m = s.Master(tb)
		return m != "" && m != old, "the sentinels promoted no replica of " + old
	})
	return m
}

// WaitReplicasOfMaster waits (limit at most) until the primary the
// sentinels name has n replicas in sync, and returns it. A failover
// meanwhile (a loaded machine can make the sentinels fail over twice) is
// followed: the primary is asked for again on each try.
func (s *Sentinels) WaitReplicasOfMaster(tb testing.TB, n int, limit time.Duration) string {
	tb.Helper()
	var m string
	poll.Until(tb, limit, func() (bool, string) {
		m = s.Master(tb)
		if m == "" {
			return false, "no sentinel names a primary"
		}
		got, err := inSync(tb.Context(), m, n)
		return err == nil && got >= int64(n), fmt.Sprintf("the primary %s: %d of %d replicas in sync (%v)", m, got, n, err)
	})
	return m
}

// Server is the primary or replica at addr.
func (s *Sentinels) Server(addr string) *Server {
	for _, r := range append([]*Server{s.Primary}, s.Replicas...) {
		if r.Addr() == addr {
			return r
		}
	}
	return nil
}

func (s *Sentinels) waitSentinel(tb testing.TB, addr string, ok func(*redis.SentinelClient) bool, what string) {
	tb.Helper()
	c := redis.NewSentinelClient(&redis.Options{Addr: addr})
	defer c.Close()
	poll.Until(tb, 20*time.Second, func() (bool, string) { return ok(c), "sentinel " + addr + " did not " + what })
}
