package app_test

import (
	"strings"
	"testing"

	"github.com/agentq/agentq/internal/app"
	"github.com/agentq/agentq/internal/config"
	"github.com/agentq/agentq/internal/problem"
	"github.com/agentq/agentq/internal/spec"
)

// The configuration's limits.max_turns reaches the spec check of every
// producer (enqueue, the dashboard's API, the SDK's client).
func TestClientOptionsCarryMaxTurns(t *testing.T) {
	cfg := config.Default()
	cfg.Limits.MaxTurns = 4
	src := "name: t\nsteps:\n  - { id: a, route: r, prompt: hi, tools: [fetch_figure], max_turns: 5 }\n"
	_, err := spec.ParseSpec("w.yaml", []byte(src), nil, app.ClientOptions(cfg).Limits)
	lines := problem.Lines(err)
	if len(lines) != 1 || !strings.Contains(lines[0], "steps[0] (a).max_turns: 5 is over the limit of 4 (limits.max_turns)") {
		t.Fatalf("got %q", lines)
	}
	cfg.Limits.MaxTurns = 5
	if _, err := spec.ParseSpec("w.yaml", []byte(src), nil, app.ClientOptions(cfg).Limits); err != nil {
		t.Fatal(err)
	}
}
