package redact_test

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/agentq/agentq/redact"
)

// Every place a secret can ride into a log line (the message, string and
// error attributes, groups, attributes bound with With) comes out redacted,
// and a huge value is cut.
func TestHandlerRedactsEveryAttribute(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(redact.Handler(slog.NewJSONHandler(&buf, nil), redact.New(key)))
	log.With("bound", "k="+key).WithGroup("g").Info("failed with "+key,
		"err", errors.New("401: "+key),
		"s", fmt.Stringer(stringer("x "+key)),
		"b", []byte(key),
		slog.Group("inner", "v", key),
		"huge", strings.Repeat("y", 1<<20))
	out := buf.String()
	if leaks(out, key) {
		t.Fatalf("a log line holds the key: %s", out)
	}
	if len(out) > 3*redact.MaxLogValue {
		t.Errorf("a 1 MiB value made a %d-byte line", len(out))
	}
	for _, want := range []string{`"bound":"k=[redacted]"`, `"msg":"failed with [redacted]"`, `"err":"401: [redacted]"`, `"v":"[redacted]"`} {
		if !strings.Contains(out, want) {
			t.Errorf("log line lacks %s: %.400s", want, out)
		}
	}
}

type stringer string

func (s stringer) String() string { return string(s) }
