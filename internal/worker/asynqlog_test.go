package worker

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
)

// asynq warns "Retry exhausted" for every task it archives, SkipRetry
// included; agentq logs its own dead-letter line, so that one is debug.
func TestAsynqRetryExhaustedIsNotAWarning(t *testing.T) {
	var buf bytes.Buffer
	l := asynqLogger{slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelWarn}))}
	l.Warn("Retry exhausted for task id=wf_x:s")
	l.Warn("Failed to write server state data: UNKNOWN")
	out := buf.String()
	if strings.Contains(out, "Retry exhausted") {
		t.Errorf("a warning for a dead letter agentq already reports: %s", out)
	}
	if !strings.Contains(out, "Failed to write server state data") {
		t.Errorf("asynq's other warnings must stay warnings: %q", out)
	}
}
