package engine

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
)

// A step's logger writes what Logger.With would have: its wf and step on
// every record, then any attributes and groups added later.
func TestStepLoggerAttachesItsAttributesAtEachRecord(t *testing.T) {
	var buf bytes.Buffer
	base := slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelInfo}))
	log := stepLogger(base, "wf_1", "m[2]")
	log.Debug("not written")
	log.With("handler", "sql").WithGroup("g").Info("hello", "k", 1)
	log.Warn("again")
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 2 {
		t.Fatalf("%d records, want 2: %s", len(lines), buf.String())
	}
	for i, want := range []string{`"wf":"wf_1","step":"m[2]","handler":"sql","g":{"k":1}}`, `"msg":"again","wf":"wf_1","step":"m[2]"}`} {
		if !strings.Contains(lines[i], want) {
			t.Errorf("record %d: %s, want it to hold %s", i, lines[i], want)
		}
	}
}
