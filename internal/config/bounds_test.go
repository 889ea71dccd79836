package config_test

import (
	"strings"
	"testing"
	"time"

	"github.com/agentq/agentq/internal/config"
	"github.com/agentq/agentq/internal/problem"
)

// The bounds of waits, open workflows, trees, signals and event streams:
// their defaults unless set, and one line naming the field for a value
// out of range (max_open_age under max_wait included).
func TestBoundsDefaultsAndRanges(t *testing.T) {
	vars := env(map[string]string{"OA_KEY": "k", "AN_KEY": "k"})
	c, err := config.Load(config.Input{Path: write(t, good), LookupEnv: vars})
	if err != nil {
		t.Fatal(err)
	}
	l, d := c.Limits, c.Dashboard
	if l.MaxWait.D() != 7*24*time.Hour || l.MaxOpenAge.D() != 30*24*time.Hour || l.MaxTreeWorkflows != 10000 ||
		l.MaxKeptSignals != 10000 || l.MaxSignalBytes != 64<<10 || d.MaxStreams != 10000 || d.MaxStreamsPerClient != 100 {
		t.Fatalf("defaults: %+v %+v", l, d)
	}
	for _, bad := range []struct{ yaml, line string }{
		{"limits: { max_wait: 500ms }", "limits.max_wait: 500ms is under 1s"},
		{"limits: { max_wait: 48h, max_open_age: 24h }", "limits.max_open_age: 24h0m0s is under limits.max_wait (48h0m0s)"},
		{"limits: { max_tree_workflows: -1 }", "limits.max_tree_workflows: -1 is not between 1 and 1,000,000"},
		{"limits: { max_kept_signals: 2000000 }", "limits.max_kept_signals: 2000000 is not between 1 and 1,000,000"},
		{"limits: { max_output_bytes: 1000, max_signal_bytes: 2000 }", "limits.max_signal_bytes: 2000 is not between 1 and limits.max_output_bytes (1000)"},
		{"dashboard: { max_streams: 10, max_streams_per_client: 20 }", "dashboard.max_streams_per_client: 20 is not between 1 and dashboard.max_streams (10)"},
	} {
		_, err := config.Load(config.Input{Path: write(t, good+bad.yaml+"\n"), LookupEnv: vars})
		lines := problem.Lines(err)
		if len(lines) != 1 || !strings.Contains(lines[0], bad.line) {
			t.Errorf("%s: %q, want one line with %q", bad.yaml, lines, bad.line)
		}
	}
	// a small max_output_bytes brings the signal cap's default down with it
	c, err = config.Load(config.Input{Path: write(t, good+"limits: { max_output_bytes: 1000 }\n"), LookupEnv: vars})
	if err != nil || c.Limits.MaxSignalBytes != 1000 {
		t.Fatalf("max_signal_bytes under a max_output_bytes of 1000: %d %v", c.Limits.MaxSignalBytes, err)
	}
}
