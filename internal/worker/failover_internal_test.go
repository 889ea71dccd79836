package worker

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/agentq/agentq/internal/app"
	"github.com/agentq/agentq/internal/config"
	"github.com/agentq/agentq/internal/dashboard"
	"github.com/agentq/agentq/internal/metrics"
	"github.com/agentq/agentq/internal/poll"
	"github.com/agentq/agentq/internal/redistest"
)

// A Cluster primary dies and its replica is promoted: a client agentq
// builds (its own, and the one asynq and asynqmon get) writes to the
// promoted replica within seconds, not after go-redis' 60s reload; the
// worker's and the dashboard's /readyz answer 503 while the dead primary
// holds slots, whichever node a PING would have reached, and 200 once
// the replica holds them.
func TestClientsFollowAClusterFailover(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a three-node Redis Cluster")
	}
	// last of all: go-redis' retries of the dead primary's address (one a
	// second) end once their clients are closed
	t.Cleanup(func() {
		poll.Until(t, 5*time.Second, func() (bool, string) {
			buf := make([]byte, 1<<20)
			stacks := string(buf[:runtime.Stack(buf, true)])
			return !strings.Contains(stacks, "(*ConnPool).tryDial"), "go-redis still retries a dial of a closed client"
		})
	})
	ctx := t.Context()
	primary, other, replica := failoverCluster(t)
	cfg := config.Default()
	cfg.Redis.Cluster = []string{primary.Addr(), other.Addr(), replica.Addr()}
	open := func() redis.UniversalClient {
		rdb, err := app.Redis(ctx, cfg.Redis)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { rdb.Close() })
		return rdb
	}
	// the probes read through clients of their own: their reloads must
	// not help the writers
	probes, writer := open(), open()
	asynqOpt, err := app.AsynqConnOpt(cfg.Redis)
	if err != nil {
		t.Fatal(err)
	}
	forAsynq, ok := asynqOpt.MakeRedisClient().(*redis.ClusterClient)
	if !ok {
		t.Fatalf("asynq's client is a %T, not a cluster client", asynqOpt.MakeRedisClient())
	}
	t.Cleanup(func() { forAsynq.Close() })

	workerProbe := httptest.NewServer(serveMux(probes, metrics.New(nil, nil), &advertiser{}, false))
	t.Cleanup(workerProbe.Close)
	dash, err := dashboard.New(ctx, dashboard.Options{Config: cfg, Redis: probes, AsynqOpt: asynqOpt})
	if err != nil {
		t.Fatal(err)
	}
	dashProbe := httptest.NewServer(dash)
	t.Cleanup(func() { dashProbe.Close(); dash.Close() })
	readyz := func(base string) (int, string) {
		resp, err := http.Get(base + "/readyz")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, strings.TrimSpace(string(b))
	}
	for _, base := range []string{workerProbe.URL, dashProbe.URL} {
		if code, body := readyz(base); code != 200 {
			t.Fatalf("%s/readyz with every primary up: %d %q", base, code, body)
		}
	}

	key := keyOn(t, primary.Addr(), 0, 8191)
	for _, c := range []redis.UniversalClient{writer, forAsynq} {
		if err := c.Set(ctx, key, "before", 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	primary.Kill()
	for range 3 {
		for _, base := range []string{workerProbe.URL, dashProbe.URL} {
			if code, body := readyz(base); code != http.StatusServiceUnavailable || !strings.Contains(body, "1 of 2 Redis Cluster primaries do not answer") {
				t.Fatalf("%s/readyz with a primary down: %d %q", base, code, body)
			}
		}
	}
	if _, body := readyz(workerProbe.URL); !strings.Contains(body, primary.Addr()) {
		t.Errorf("the worker's /readyz does not name the primary down: %q", body)
	}
	if _, body := readyz(dashProbe.URL); strings.Contains(body, primary.Addr()) {
		t.Errorf("the dashboard's /readyz names an address to a caller not signed in: %q", body)
	}

	promoted := redis.NewClient(&redis.Options{Addr: replica.Addr()})
	t.Cleanup(func() { promoted.Close() })
	if err := promoted.Do(ctx, "CLUSTER", "FAILOVER", "TAKEOVER").Err(); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	for name, c := range map[string]redis.UniversalClient{"agentq's client": writer, "asynq's client": forAsynq} {
		poll.Until(t, 10*time.Second-time.Since(start), func() (bool, string) {
			err := c.Set(ctx, key, name, 0).Err()
			return err == nil, fmt.Sprintf("%s still cannot write %s's slot %s after the promotion: %v", name, key, time.Since(start).Round(time.Millisecond), err)
		})
		if v, err := promoted.Get(ctx, key).Result(); err != nil || v != name {
			t.Fatalf("the promoted replica holds %q (%v), not what %s wrote", v, err, name)
		}
	}
	t.Logf("both clients wrote to the promoted replica %s after its promotion", time.Since(start).Round(time.Millisecond))
	for _, base := range []string{workerProbe.URL, dashProbe.URL} {
		poll.Until(t, 10*time.Second, func() (bool, string) {
			code, body := readyz(base)
			return code == 200, fmt.Sprintf("%s/readyz after the promotion: %d %q", base, code, body)
		})
	}
}

// failoverCluster starts a Redis Cluster of two primaries, the first
// with a replica, and returns them once the replica has its primary's
// data. Skipped without redis-server (as redistest.NewServer is).
func failoverCluster(t *testing.T) (primary, other, replica *redistest.Server) {
	t.Helper()
	ctx := t.Context()
	nodes := make([]*redistest.Server, 3)
	clients := make([]*redis.Client, 3)
	for i := range nodes {
		nodes[i] = redistest.NewServer(t, "--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
			"--save", "", "--appendonly", "no", "--repl-diskless-sync-delay", "0")
		nodes[i].Start()
		clients[i] = redis.NewClient(&redis.Options{Addr: nodes[i].Addr()})
		t.Cleanup(func() { clients[i].Close() })
	}
	do := func(i int, args ...any) string {
		t.Helper()
		v, err := clients[i].Do(ctx, args...).Text()
		if err != nil {
			t.Fatalf("%v on %s: %v", args, nodes[i].Addr(), err)
		}
		return v
	}
	do(0, "CLUSTER", "ADDSLOTSRANGE", 0, 8191)
	do(1, "CLUSTER", "ADDSLOTSRANGE", 8192, 16383)
	for _, i := range []int{1, 2} {
		do(0, "CLUSTER", "MEET", "127.0.0.1", nodes[i].Port)
	}
	primaryID := do(0, "CLUSTER", "MYID")
	poll.Until(t, 15*time.Second, func() (bool, string) {
		for i := range nodes {
			info := do(i, "CLUSTER", "INFO")
			if !strings.Contains(info, "cluster_state:ok") || !strings.Contains(info, "cluster_known_nodes:3") {
				return false, fmt.Sprintf("node %s: %q", nodes[i].Addr(), info)
			}
		}
		return true, ""
	})
	do(2, "CLUSTER", "REPLICATE", primaryID)
	poll.Until(t, 15*time.Second, func() (bool, string) {
		repl := do(2, "INFO", "replication")
		seen := do(1, "CLUSTER", "NODES")
		return strings.Contains(repl, "master_link_status:up") && strings.Contains(seen, "slave "+primaryID),
			fmt.Sprintf("the replica: %q; the other primary sees: %q", repl, seen)
	})
	return nodes[0], nodes[1], nodes[2]
}

// keyOn returns a key whose slot is in [from, to].
func keyOn(t *testing.T, addr string, from, to int64) string {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: addr})
	defer c.Close()
	for i := range 1000 {
		k := fmt.Sprintf("failover:%d", i)
		slot, err := c.ClusterKeySlot(t.Context(), k).Result()
		if err != nil {
			t.Fatal(err)
		}
		if slot >= from && slot <= to {
			return k
		}
	}
	t.Fatalf("no key of slots %d-%d", from, to)
	return ""
}
