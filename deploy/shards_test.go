package deploy

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/agentq/agentq/internal/shard"
)

var updateShards = flag.Bool("update-shards", false, "rewrite the chart's files/shards.json from internal/shard")

// shardTableQueues are the queues whose shard names the chart carries:
// worker.queues' default ones (webhooks is never sharded). Other sharded
// queues are named in worker.keda.shardNames.
var shardTableQueues = []string{"critical", "default", "low"}

var shardTablePath = filepath.Join(chartDir, "files", "shards.json")

// shardTable is the chart's files/shards.json, from internal/shard.Names:
// queue → shard count (2 to shard.Max) → each shard's suffix K, in shard
// order, space-separated: 0 names shard I "QUEUE.I", K > 0 "QUEUE.I.K".
func shardTable(t *testing.T) []byte {
	t.Helper()
	tab := map[string]map[string]string{}
	for _, q := range shardTableQueues {
		tab[q] = map[string]string{}
		for n := 2; n <= shard.Max; n++ {
			ks := make([]string, n)
			for i, name := range shard.Names(q, n) {
				k, ok := strings.CutPrefix(name, fmt.Sprintf("%s.%d", q, i))
				switch {
				case !ok:
					t.Fatalf("shard %d of %s in %d is %q", i, q, n, name)
				case k == "":
					ks[i] = "0"
				default:
					ks[i] = strings.TrimPrefix(k, ".")
				}
			}
			tab[q][strconv.Itoa(n)] = strings.Join(ks, " ")
		}
	}
	data, err := json.MarshalIndent(tab, "", " ")
	if err != nil {
		t.Fatal(err)
	}
	return append(data, '\n')
}

// The chart's shard table is the one internal/shard makes.
func TestChartShardTable(t *testing.T) {
	want := shardTable(t)
	if *updateShards {
		if err := os.WriteFile(shardTablePath, want, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(shardTablePath)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != string(want) {
		t.Fatalf("%s is not internal/shard's names: go test ./deploy -run TestChartShardTable -update-shards", shardTablePath)
	}
}

// The ScaledObject watches every shard of every queue it scales on, with
// the names the workers use (shard.Names): from the chart's table for
// the stock queues, from worker.keda.shardNames for others; each shard's
// listLength is the queue's pendingPerReplica over its shards, rounded up.
func TestChartKEDAShardTriggers(t *testing.T) {
	v := with(t, nil, "worker.keda.enabled", true)
	v = with(t, v, "worker.queues", "critical=6,default=3,low=1,search=2")
	v = with(t, v, "config.queues", map[string]any{"default": map[string]any{"shards": 6}, "low": map[string]any{"shards": 128},
		"search": map[string]any{"weight": 2, "shards": 3}, "critical": map[string]any{"shards": 1}})
	v = with(t, v, "worker.keda.shardNames", map[string]any{"search": toAny(shard.Names("search", 3))})
	so := decode(t, render(t, v))["ScaledObject"][0].(*kedaScaledObject)
	var want, got []string
	for _, q := range []struct {
		name string
		n    int
	}{{"critical", 1}, {"default", 6}, {"low", 128}, {"search", 3}} {
		for _, s := range shard.Names(q.name, q.n) {
			want = append(want, fmt.Sprintf("asynq:{%s}:pending %d", s, (50+q.n-1)/q.n))
		}
	}
	for _, tr := range so.Spec.Triggers {
		got = append(got, tr.Metadata["listName"]+" "+tr.Metadata["listLength"])
		if tr.Type != "redis" || tr.Metadata["address"] != "redis:6379" {
			t.Errorf("trigger %+v", tr)
		}
	}
	if !slices.Equal(got, want) {
		t.Errorf("triggers\n%v\nwant\n%v", got, want)
	}

	for _, tc := range []struct {
		values map[string]any
		want   string
	}{
		{with(t, v, "worker.keda.shardNames", map[string]any{}),
			"templates/worker-scaling.yaml: config.queues.search.shards is 3 and the chart knows the shard names of critical, default and low only: set worker.keda.shardNames.search to the output of go run github.com/agentq/agentq/deploy/shardnames search=3"},
		{with(t, v, "worker.keda.shardNames.search", toAny(shard.Names("search", 2))),
			"templates/worker-scaling.yaml: worker.keda.shardNames.search has 2 names, config.queues.search.shards is 3"},
		{with(t, v, "worker.keda.shardNames.critical", toAny(shard.Names("critical", 2))),
			`templates/worker-scaling.yaml: worker.keda.shardNames.critical: queue "critical" is not sharded`},
		{with(t, v, "worker.keda.shardNames.search", []any{"search.0", "search/1", "search.2"}), "search/1"},
	} {
		if msg := renderRefused(t, tc.values); !strings.Contains(msg, tc.want) {
			t.Errorf("refusal %q does not say %q", msg, tc.want)
		}
	}
}

func toAny(s []string) []any {
	out := make([]any, len(s))
	for i, v := range s {
		out[i] = v
	}
	return out
}
