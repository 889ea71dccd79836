package engine_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/agentq/agentq/internal/app"
	"github.com/agentq/agentq/internal/chaosllm"
	"github.com/agentq/agentq/internal/config"
	"github.com/agentq/agentq/internal/poll"
	"github.com/agentq/agentq/internal/redistest"
	"github.com/agentq/agentq/internal/store"
	"github.com/agentq/agentq/internal/testenv"
)

// The Cluster failover drill, with redis.durability asking one replica to
// confirm. A Redis Cluster of three primaries, each with a replica: the
// first primary holds the default queue's slot alone, the other two
// every workflow's. Workflows (the Sentinel drill's mix) are submitted before and
// through the failover; mid-run the queue's primary is SIGKILLed and its
// replica promoted (CLUSTER FAILOVER TAKEOVER, as an operator or a
// managed cluster does), and the dead primary's process is started again
// (as an orchestrator would): it rejoins as a replica of the new primary,
// so one replica can confirm again; until then, steps wait. Every submit
// that was not told "done" is retried with its idempotency key until it
// is. Then:
//   - every workflow whose submit succeeded completes: none lost;
//   - the provider answered exactly once per step: no fan-in ran twice, no
//     confirmed answer was paid for twice;
//   - steps resume after the promotion (the times are logged).
func TestClusterFailoverDrill(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a four-node Redis Cluster")
	}
	t.Parallel()
	n := drillWorkflows(t)
	ctx := t.Context()
	nodes := queueClusterNodes(t, "default", 3)
	queuePrimary, queueReplica := nodes[0], nodes[3]
	var addrs []string
	for _, n := range nodes {
		addrs = append(addrs, n.Addr())
	}

	e := testenv.Start(t, testenv.Options{NoWorker: true, RedisAddr: addrs[1], Steps: drillSteps, RecordAnswered: 100_000,
		Durability: &config.Durability{Replicas: 1, Timeout: config.Duration(time.Second)},
		Scenario:   chaosllm.Scenario{Phases: []chaosllm.Phase{{Latency: chaosllm.Fixed(100 * time.Millisecond)}}}})
	// the environment on the cluster: its client, store and worker
	cfg := e.Config
	cfg.Redis.Addr, cfg.Redis.DB, cfg.Redis.Cluster = addrs[0], 0, addrs
	rdb, err := app.Redis(ctx, cfg.Redis)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rdb.Close() }) // after the worker stops (registered below)
	cc := rdb.(*redis.ClusterClient)
	poll.Until(t, 20*time.Second, func() (bool, string) {
		err := cc.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error { return m.Ping(ctx).Err() })
		return err == nil, fmt.Sprintf("the cluster's primaries: %v", err)
	})
	e.Config, e.Redis = cfg, rdb
	e.Store = store.New(rdb, cfg.Retention.D(), nil)
	e.Client = e.NewClient()
	e.StartWorker(t)

	d := startDrill(t, e, n)

	// mid-run: the queue's primary dies, and its replica takes over
	replica := redis.NewClient(&redis.Options{Addr: queueReplica.Addr()})
	t.Cleanup(func() { replica.Close() })
	killedAt := time.Now()
	queuePrimary.Kill()
	if err := replica.Do(ctx, "CLUSTER", "FAILOVER", "TAKEOVER").Err(); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, 10*time.Second, func() (bool, string) {
		role, err := replica.Do(ctx, "ROLE").Slice()
		return err == nil && len(role) > 0 && role[0] == "master", fmt.Sprintf("replica %s after TAKEOVER: %v %v", queueReplica.Addr(), role, err)
	})
	promotedAt := time.Now()
	// the dead primary's process comes back, as an orchestrator restarts
	// it: its nodes.conf names the cluster, whose newer epoch makes it a
	// replica of the promoted one, so one replica can confirm again
	queuePrimary.Start()
	t.Logf("queue primary %s killed; %s promoted after %s", queuePrimary.Addr(), queueReplica.Addr(), promotedAt.Sub(killedAt).Round(time.Millisecond))

	resumed := firstStepDone(t, e, promotedAt)
	// the promoted primary's replica in sync: a write of its slot, and WAIT 1
	syncKey := "asynq:{default}:sync"
	poll.Until(t, 20*time.Second, func() (bool, string) {
		conn := replica.Conn()
		defer conn.Close()
		err := conn.Set(ctx, syncKey, "1", time.Minute).Err()
		var got int64
		if err == nil {
			got, err = conn.Wait(ctx, 1, 200*time.Millisecond).Result()
		}
		return err == nil && got == 1, fmt.Sprintf("the promoted primary %s: %d replicas in sync (%v)", queueReplica.Addr(), got, err)
	})
	t.Logf("the promoted primary's replica in sync %s after the promotion", time.Since(promotedAt).Round(time.Millisecond))
	restarted := redis.NewClient(&redis.Options{Addr: queuePrimary.Addr()})
	t.Cleanup(func() { restarted.Close() })
	if role, err := restarted.Do(ctx, "ROLE").Slice(); err != nil || len(role) < 3 || role[0] != "slave" || role[2] != int64(queueReplica.Port) {
		t.Errorf("the restarted process %s is not a replica of the promoted primary: ROLE %v %v", queuePrimary.Addr(), role, err)
	}
	steps, answers := d.finish(t)
	t.Logf("%d workflows (%d provider calls), %d submits retried with their key; steps resumed %s after the promotion; %d answers",
		n, steps, d.retried, resumed.Round(time.Millisecond), answers)
}

// queueClusterNodes starts a Redis Cluster of primaries primaries (two
// or more), each with a replica: the first primary holds queue's slot
// alone, the others every other slot (every workflow's), split between
// them. It returns its nodes (the primaries, then their replicas, in the
// same order) once every replica is in sync; a test kills, restarts or
// freezes them.
func queueClusterNodes(t *testing.T, queue string, primaries int) []*redistest.Server {
	t.Helper()
	ctx := t.Context()
	nodes := make([]*redistest.Server, 2*primaries)
	clients := make([]*redis.Client, len(nodes))
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
	qKey := "asynq:{" + queue + "}:pending"
	slot, err := clients[0].ClusterKeySlot(ctx, qKey).Result()
	if err != nil {
		t.Fatal(err)
	}
	do(0, "CLUSTER", "ADDSLOTS", slot)
	// the other slots, in order, in primaries-1 runs of about equal size
	var others []int64
	for s := range int64(16384) {
		if s != slot {
			others = append(others, s)
		}
	}
	per := (len(others) + primaries - 2) / (primaries - 1)
	owner := map[int64]int{slot: 0}
	for p := 1; p < primaries; p++ {
		run := others[min((p-1)*per, len(others)):min(p*per, len(others))]
		for len(run) > 0 { // contiguous ranges (queue's slot splits one)
			end := 0
			for end+1 < len(run) && run[end+1] == run[end]+1 {
				end++
			}
			do(p, "CLUSTER", "ADDSLOTSRANGE", run[0], run[end])
			for _, s := range run[:end+1] {
				owner[s] = p
			}
			run = run[end+1:]
		}
	}
	for i := 1; i < len(nodes); i++ {
		do(0, "CLUSTER", "MEET", "127.0.0.1", nodes[i].Port)
	}
	known := fmt.Sprintf("cluster_known_nodes:%d", len(nodes))
	poll.Until(t, 15*time.Second, func() (bool, string) {
		for i := range nodes {
			info := do(i, "CLUSTER", "INFO")
			if !strings.Contains(info, "cluster_state:ok") || !strings.Contains(info, known) {
				return false, fmt.Sprintf("node %s: %q", nodes[i].Addr(), info)
			}
		}
		return true, ""
	})
	for p := range primaries {
		do(primaries+p, "CLUSTER", "REPLICATE", do(p, "CLUSTER", "MYID"))
	}
	if s, _ := clients[0].ClusterKeySlot(ctx, "agentq:sync").Result(); owner[s] == 0 {
		t.Fatalf("agentq's keys share the queue's slot %d", slot)
	}
	// each replica in sync: a write of one of its primary's slots, and WAIT 1
	for p := range primaries {
		key := qKey + ":sync"
		for i := 0; owner[mustSlot(t, clients[0], key)] != p; i++ {
			key = fmt.Sprintf("agentq:sync:%d", i)
		}
		poll.Until(t, 15*time.Second, func() (bool, string) {
			conn := clients[p].Conn()
			defer conn.Close()
			err := conn.Set(ctx, key, "1", time.Minute).Err()
			var got int64
			if err == nil {
				got, err = conn.Wait(ctx, 1, 200*time.Millisecond).Result()
			}
			return err == nil && got == 1, fmt.Sprintf("primary %s's replica: %d in sync (%v)", nodes[p].Addr(), got, err)
		})
	}
	return nodes
}

// mustSlot is key's cluster slot.
func mustSlot(t *testing.T, c *redis.Client, key string) int64 {
	t.Helper()
	s, err := c.ClusterKeySlot(t.Context(), key).Result()
	if err != nil {
		t.Fatal(err)
	}
	return s
}
