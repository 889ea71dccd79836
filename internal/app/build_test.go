package app_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/agentq/agentq/internal/app"
	"github.com/agentq/agentq/internal/config"
	"github.com/agentq/agentq/internal/redistest"
)

func TestMain(m *testing.M) { os.Exit(redistest.Main(m)) }

const cfgYAML = `providers:
  - { name: oa, kind: openai, base_url: "http://127.0.0.1:1/v1", keys: ["sk-build-test-key-1"] }
routes:
  main: { targets: [ { provider: oa, model: m } ] }
`

func load(t *testing.T, db redistest.DB) config.Config {
	t.Helper()
	vars := map[string]string{"AGENTQ_REDIS_ADDR": db.Addr, "AGENTQ_REDIS_DB": strconv.Itoa(db.DB)}
	cfg, err := config.Load(config.Input{Path: "t.yaml", Data: []byte(cfgYAML), LookupEnv: func(k string) (string, bool) { v, ok := vars[k]; return v, ok }})
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// Build makes the parts asked for and nothing else; its logger never
// carries a configured secret or one of Options.Secrets; Close closes the
// Redis it opened.
func TestBuildMakesWhatIsAskedFor(t *testing.T) {
	db, _ := redistest.New(t)
	cfg := load(t, db)
	var logs bytes.Buffer
	a, err := app.Build(t.Context(), cfg, app.Options{Logger: slog.New(slog.NewJSONHandler(&logs, nil)), Secrets: []string{"dashboard-token-42"}}, app.Producer())
	if err != nil {
		t.Fatal(err)
	}
	if a.Client == nil || a.Router != nil || a.Metrics != nil || a.Health != nil || a.Breakers != nil || a.AsynqOpt != nil {
		t.Errorf("Producer built %+v", a)
	}
	a.Logger.Info("leak?", "err", "sk-build-test-key-1 and dashboard-token-42")
	if s := logs.String(); strings.Contains(s, "sk-build-test-key-1") || strings.Contains(s, "dashboard-token-42") || !strings.Contains(s, "leak?") {
		t.Errorf("log line %s", s)
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if err := a.Redis.Ping(context.Background()).Err(); err == nil {
		t.Error("Close left the Redis it opened open")
	}
}

// The worker's parts over a given Redis: the router over the configured
// routes, its metrics and health; Close stops their background work and
// leaves the given Redis open. The dashboard's reader parts build no
// router.
func TestBuildRouterAndMonitor(t *testing.T) {
	db, rdb := redistest.New(t)
	cfg := load(t, db)
	a, err := app.Build(t.Context(), cfg, app.Options{Redis: rdb}, app.Router(app.RouterOptions{}))
	if err != nil {
		t.Fatal(err)
	}
	if a.Router == nil || a.Metrics == nil || a.Health == nil || a.Inspector == nil || a.Client != nil {
		t.Errorf("Router built %+v", a)
	}
	if got := a.Router.Targets(); len(got) != 1 || got[0].Provider != "oa" || got[0].Model != "m" {
		t.Errorf("targets %+v", got)
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if err := rdb.Ping(context.Background()).Err(); err != nil {
		t.Errorf("Close closed the given Redis: %v", err)
	}
	m, err := app.Build(t.Context(), cfg, app.Options{Redis: rdb}, app.Producer(), app.Monitor(), app.AsynqMon())
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if m.Router != nil || m.Client == nil || m.Breakers == nil || m.Health == nil || m.Metrics == nil || m.AsynqOpt == nil {
		t.Errorf("Producer, Monitor and AsynqMon built %+v", m)
	}
}

func TestBuildRefuses(t *testing.T) {
	db, rdb := redistest.New(t)
	cfg := load(t, db)
	if _, err := app.Build(t.Context(), cfg, app.Options{Redis: rdb}, app.Producer(), app.Producer()); err == nil || !strings.Contains(err.Error(), "Producer is asked for twice") {
		t.Errorf("a part twice: %v", err)
	}
	cfg.Redis.Addr = "127.0.0.1:1"
	if _, err := app.Build(t.Context(), cfg, app.Options{}, app.Producer()); !errors.Is(err, app.ErrRedisUnreachable) {
		t.Errorf("no Redis: %v", err)
	}
}
