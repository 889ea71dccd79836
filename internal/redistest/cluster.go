package redistest

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/agentq/agentq/internal/poll"
)

// Cluster starts a throwaway three-master Redis Cluster for the test and
// returns a client on it (both stopped at the end of the test). Without
// redis-server and redis-cli it skips the test, or fails it under CI=true.
func Cluster(tb testing.TB) (*redis.ClusterClient, []string) {
	tb.Helper()
	need(tb, "a Redis Cluster", "redis-server", "redis-cli")
	procs, err := StartCluster(tb.Context(), 3)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(procs.Stop)
	c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: procs.Addrs})
	tb.Cleanup(func() { c.Close() })
	// the client must see every primary before it is used
	poll.Until(tb, 20*time.Second, func() (bool, string) {
		err := c.ForEachShard(tb.Context(), func(ctx context.Context, m *redis.Client) error { return m.Ping(ctx).Err() })
		return err == nil, fmt.Sprintf("the cluster's primaries: %v", err)
	})
	return c, procs.Addrs
}

// ClusterNode starts a throwaway one-node Redis in cluster mode holding
// every slot (as a one-shard managed cluster is) and returns a plain
// client on it: scripts with keys of several slots are refused with
// CROSSSLOT. Stopped at the end of the test; skipped as Cluster is.
func ClusterNode(tb testing.TB) *redis.Client {
	tb.Helper()
	c := redis.NewClient(&redis.Options{Addr: clusterNode(tb, need(tb, "a cluster-mode Redis", "redis-server")[0])})
	tb.Cleanup(func() { c.Close() })
	if err := c.Do(tb.Context(), "CLUSTER", "ADDSLOTSRANGE", 0, 16383).Err(); err != nil {
		tb.Fatal(err)
	}
	poll.Until(tb, 10*time.Second, func() (bool, string) {
		info, err := c.ClusterInfo(tb.Context()).Result()
		return err == nil && strings.Contains(info, "cluster_state:ok"), fmt.Sprintf("the one-node cluster: %v %q", err, info)
	})
	return c
}

// clusterNode starts a redis-server in cluster mode (no slots yet), stopped
// at the end of the test, and returns its address once it answers.
func clusterNode(tb testing.TB, bin string) string {
	tb.Helper()
	dir := tb.TempDir()
	return startTestServer(tb, bin, "--cluster-enabled", "yes", "--cluster-config-file", filepath.Join(dir, "nodes.conf"),
		"--save", "", "--appendonly", "no", "--dir", dir)
}

// startTestServer runs redis-server with args (a config file first, if any) on
// a free loopback port, stopped at the end of the test, and returns its
// address once it answers.
func startTestServer(tb testing.TB, bin string, args ...string) string {
	tb.Helper()
	if !slices.Contains(args, "--dir") {
		args = append(args, "--dir", tb.TempDir())
	}
	nd, addr, err := launch(tb.Context(), bin, args, filepath.Join(tb.TempDir(), "redis.log"))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(nd.stop)
	return addr
}

// need finds the binaries a drill needs on the PATH; without them it skips
// the test, or fails it under CI=true (where they must be installed).
func need(tb testing.TB, what string, names ...string) []string {
	tb.Helper()
	var paths []string
	for _, n := range names {
		p, err := exec.LookPath(n)
		if err != nil {
			if os.Getenv("CI") == "true" {
				tb.Fatalf("CI=true but %s is missing (%s needs it)", n, what)
			}
			tb.Skipf("%s needs %s", what, strings.Join(names, " and "))
		}
		paths = append(paths, p)
	}
	return paths
}

// Sentinel starts a throwaway master and a sentinel watching it (as
// "agentq") and returns both addresses; stopped at the end of the test.
func Sentinel(tb testing.TB) (master, sentinel string) {
	tb.Helper()
	bin := need(tb, "Sentinel", "redis-server")[0]
	master = startTestServer(tb, bin, "--save", "", "--appendonly", "no")
	host, port, _ := net.SplitHostPort(master)
	conf := filepath.Join(tb.TempDir(), "sentinel.conf")
	if err := os.WriteFile(conf, []byte("sentinel monitor agentq "+host+" "+port+" 1\nsentinel down-after-milliseconds agentq 5000\n"), 0o600); err != nil {
		tb.Fatal(err)
	}
	sentinel = startTestServer(tb, bin, conf, "--sentinel")
	// wait until the sentinel reports the master
	c := redis.NewSentinelClient(&redis.Options{Addr: sentinel})
	defer c.Close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if a, err := c.GetMasterAddrByName(tb.Context(), "agentq").Result(); err == nil && len(a) == 2 {
			return master, sentinel
		}
		if time.Now().After(deadline) {
			tb.Fatal("the sentinel did not report its master within 10s")
		}
		time.Sleep(20 * time.Millisecond) //nolint: polling with a deadline
	}
}
