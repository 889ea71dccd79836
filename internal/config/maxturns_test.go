package config_test

import (
	"strings"
	"testing"

	"github.com/agentq/agentq/internal/config"
	"github.com/agentq/agentq/internal/problem"
)

// limits.max_turns caps a step's max_turns: 20 unless set, and it must be
// between 1 and 100.
func TestLimitsMaxTurns(t *testing.T) {
	vars := env(map[string]string{"OA_KEY": "k", "AN_KEY": "k"})
	c, err := config.Load(config.Input{Path: write(t, good), LookupEnv: vars})
	if err != nil || c.Limits.MaxTurns != 20 {
		t.Fatalf("default max_turns %d, %v", c.Limits.MaxTurns, err)
	}
	c, err = config.Load(config.Input{Path: write(t, good+"limits: { max_turns: 5 }\n"), LookupEnv: vars})
	if err != nil || c.Limits.MaxTurns != 5 {
		t.Fatalf("max_turns %d, %v", c.Limits.MaxTurns, err)
	}
	for _, n := range []string{"-1", "101"} {
		_, err := config.Load(config.Input{Path: write(t, good+"limits: { max_turns: "+n+" }\n"), LookupEnv: vars})
		lines := problem.Lines(err)
		if len(lines) != 1 || !strings.Contains(lines[0], "limits.max_turns: "+n+" is not between 1 and 100") {
			t.Errorf("max_turns %s: %q", n, lines)
		}
	}
}
