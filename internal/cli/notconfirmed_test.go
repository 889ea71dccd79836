package cli_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/agentq/agentq/internal/cli"
	"github.com/agentq/agentq/internal/config"
	"github.com/agentq/agentq/internal/redistest"
	"github.com/agentq/agentq/internal/testenv"
)

// With redis.durability, a submit or a cancel that reached the primary
// but not the replica exits 6 with one line saying so; a submit's line
// names the idempotency key that makes a second submit safe, and that
// submit returns the same workflow.
func TestNotConfirmedExitsSixNamingTheKey(t *testing.T) {
	primary, replicas := redistest.Replicated(t, 1)
	e := testenv.Start(t, testenv.Options{RedisAddr: primary.Addr(), NoWorker: true,
		Durability: &config.Durability{Replicas: 1, Timeout: config.Duration(time.Second)}}) // a second: an in-sync replica on a loaded machine
	vars, _ := envFor(t, e)
	cfg := writeFile(t, "agentq.yaml", testenv.ConfigYAML+"redis:\n  durability: { replicas: 1, timeout: 1s }\n")
	spec := writeFile(t, "hello.yaml", hello)

	r := run(t, cli.Enqueue, vars, spec, "--config", cfg, "--input", "who=Ada", "--no-check", "--json")
	if r.code != 0 {
		t.Fatalf("submit with the replica in sync: exit %d, %s", r.code, r.err)
	}
	var st struct {
		ID  string `json:"id"`
		Key string `json:"idempotency_key"`
	}
	if err := json.Unmarshal([]byte(r.out), &st); err != nil || st.ID == "" || st.Key == "" {
		t.Fatalf("submit --json %q (%v): want the workflow with its generated idempotency_key", r.out, err)
	}

	replicas[0].Freeze()
	t.Cleanup(replicas[0].Thaw)
	r = run(t, cli.Enqueue, vars, spec, "--config", cfg, "--input", "who=Grace", "--no-check")
	if r.code != cli.ExitNotConfirmed {
		t.Fatalf("submit with the replica frozen: exit %d (%s), want 6", r.code, r.err)
	}
	line := strings.TrimSpace(r.err)
	if strings.Count(line, "\n") != 0 || !strings.Contains(line, "not confirmed by 1 replica") || !strings.Contains(line, "may not survive a failover") {
		t.Fatalf("stderr %q: want one line saying the write was not confirmed", r.err)
	}
	i := strings.Index(line, `idempotency key "`)
	if i < 0 {
		t.Fatalf("stderr %q does not name the idempotency key", line)
	}
	key := line[i+len(`idempotency key "`):]
	key = key[:strings.IndexByte(key, '"')]

	if r := run(t, cli.Enqueue, vars, "cancel", st.ID, "--config", cfg); r.code != cli.ExitNotConfirmed {
		t.Fatalf("cancel with the replica frozen: exit %d (%s), want 6", r.code, r.err)
	}

	replicas[0].Thaw()
	redistest.WaitReplicas(t, primary.Addr(), 1)
	r = run(t, cli.Enqueue, vars, spec, "--config", cfg, "--input", "who=Grace", "--no-check", "--idempotency-key", key, "--json")
	if r.code != 0 || !strings.Contains(r.out, `"existing": true`) && !strings.Contains(r.out, `"existing":true`) {
		t.Fatalf("resubmit with the key %q: exit %d, out %q, err %q; want the existing workflow", key, r.code, r.out, r.err)
	}
}
