package app_test

import (
	"context"
	"fmt"
	"strconv"
	"testing"

	"github.com/agentq/agentq/internal/app"
	"github.com/agentq/agentq/internal/config"
	"github.com/agentq/agentq/internal/llmtest"
	"github.com/agentq/agentq/internal/redistest"
)

// A worker wider than 256 keeps a connection for each of its slots: its
// router's provider, over plain HTTP/1.1, carries three rounds of 400
// calls in flight together (worker.concurrency 400) on 400 connections,
// not 400 and then the 144 a pool of 256 would close and dial again each
// round.
func TestAWorkerKeepsItsConcurrencyOfConnections(t *testing.T) {
	const width = 400
	db, _ := redistest.New(t)
	url, dialed := llmtest.Rounds(t, width)
	yaml := fmt.Sprintf(`providers:
  - { name: local, kind: openai, base_url: %q, keys: [%q] }
routes:
  main: { targets: [ { provider: local, model: m } ] }
worker: { concurrency: %d }
`, url+"/v1", llmtest.GoodKey, width)
	vars := map[string]string{"AGENTQ_REDIS_ADDR": db.Addr, "AGENTQ_REDIS_DB": strconv.Itoa(db.DB)}
	cfg, err := config.Load(config.Input{Path: "t.yaml", Data: []byte(yaml), LookupEnv: func(k string) (string, bool) { v, ok := vars[k]; return v, ok }})
	if err != nil {
		t.Fatal(err)
	}
	a, err := app.Build(t.Context(), cfg, app.Options{}, app.Router(app.RouterOptions{}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = a.Close() })
	for round := range 3 {
		llmtest.AtOnce(t, width, fmt.Sprintf("round %d", round), func() error {
			_, err := a.Router.Chat(context.Background(), "main", llmtest.Ask("hello"))
			return err
		})
	}
	if n := dialed.Opened(); n < width || n > width+width/4 {
		t.Errorf("3 rounds of %d calls in flight together opened %d connections, want about %d", width, n, width)
	}
}
