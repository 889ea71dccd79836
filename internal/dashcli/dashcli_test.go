package dashcli_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/agentq/agentq/internal/cli"
	"github.com/agentq/agentq/internal/dashcli"
	"github.com/agentq/agentq/internal/poll"
	"github.com/agentq/agentq/internal/redistest"
	"github.com/agentq/agentq/internal/store"
	"github.com/agentq/agentq/llmclient"
)

func TestMain(m *testing.M) { os.Exit(redistest.Main(m)) }

// the workers' configuration: its keys name variables the dashboard's
// environment does not have
const workersYAML = `providers:
  - { name: oa, kind: openai, keys: ["${UNSET_OPENAI_KEY}", "${UNSET_OPENAI_KEY_2}"] }
  - { name: an, kind: anthropic, keys: ["${UNSET_ANTHROPIC_KEY}"] }
routes:
  main: { targets: [ { provider: oa, model: m }, { provider: an, model: m2 } ] }
`

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}
func (s *syncBuffer) String() string { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }

// The dashboard needs no provider key: with the workers' configuration,
// whose keys are unset variables, and no key in its environment, it
// starts, is ready, and lists the keys a worker advertised.
func TestDashboardServesWithoutProviderKeys(t *testing.T) {
	db, rdb := redistest.New(t)
	ad := store.AdKey{Provider: "an", Fingerprint: llmclient.Fingerprint("an", 0, "sk-ant-worker"), ID: llmclient.KeyID("sk-ant-worker")}
	if err := store.NewFleet(rdb, nil).Advertise(t.Context(), store.WorkerAd{ID: "w1", Keys: []store.AdKey{ad}}, time.Minute); err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(t.TempDir(), "agentq.yaml")
	if err := os.WriteFile(cfg, []byte(workersYAML), 0o600); err != nil {
		t.Fatal(err)
	}
	vars := map[string]string{"AGENTQ_REDIS_ADDR": db.Addr, "AGENTQ_REDIS_DB": strconv.Itoa(db.DB), "AGENTQ_DASHBOARD_TOKEN": "tok-123"}
	var out, errOut syncBuffer
	cmd := dashcli.Command(cli.Env{Out: &out, Err: &errOut, LookupEnv: func(k string) (string, bool) { v, ok := vars[k]; return v, ok }})
	cmd.SetArgs([]string{"--config", cfg, "--addr", "127.0.0.1:0"})
	cmd.SetOut(&out)
	cmd.SetErr(&errOut)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- cmd.ExecuteContext(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("dashboard: %v", err)
		}
	}()
	re := regexp.MustCompile(`dashboard on http://(\S+)`)
	var addr string
	poll.Until(t, 15*time.Second, func() (bool, string) {
		if m := re.FindStringSubmatch(out.String()); m != nil {
			addr = m[1]
			return true, ""
		}
		select {
		case err := <-done:
			done <- err
			t.Fatalf("the dashboard stopped: %v\n%s", err, errOut.String())
		default:
		}
		return false, fmt.Sprintf("the dashboard does not serve: %q %q", out.String(), errOut.String())
	})
	get := func(path string) (int, []byte) {
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, "http://"+addr+path, nil)
		req.Header.Set("Authorization", "Bearer tok-123")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var b bytes.Buffer
		_, _ = b.ReadFrom(resp.Body)
		return resp.StatusCode, b.Bytes()
	}
	if code, body := get("/readyz"); code != http.StatusOK {
		t.Errorf("/readyz: %d %s", code, body)
	}
	code, body := get("/api/v1/keys")
	var keys []store.KeyInfo
	if code != http.StatusOK || json.Unmarshal(body, &keys) != nil || len(keys) != 1 || keys[0].Fingerprint != ad.Fingerprint || keys[0].Workers != 1 {
		t.Errorf("/api/v1/keys: %d %s, want the worker's key %s only", code, body, ad.Fingerprint)
	}
}
