package agentq_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentq/agentq"
	"github.com/agentq/agentq/internal/redistest"
)

// What the enqueue command branches on for its exit codes is the SDK's
// to branch on too: a Redis or a dashboard that does not answer is
// ErrUnreachable (exit 3) from NewClient and from a server client's call.
func TestUnansweredCallsAreErrUnreachable(t *testing.T) {
	srv := redistest.NewServer(t) // its port chosen, never started
	if _, err := agentq.NewClient(t.Context(), configFor(t, srv.Addr())); !errors.Is(err, agentq.ErrUnreachable) {
		t.Fatalf("NewClient with no Redis: %v, want ErrUnreachable", err)
	}
	c := agentq.NewServerClient("http://127.0.0.1:1", "")
	_, err := c.Status(t.Context(), "wf_x")
	if !errors.Is(err, agentq.ErrUnreachable) || !errors.Is(err, agentq.ErrUnavailable) {
		t.Fatalf("a server that does not answer: %v, want ErrUnreachable and ErrUnavailable", err)
	}
	for ev, err := range c.Events(t.Context(), "wf_x", "") {
		if !errors.Is(err, agentq.ErrUnreachable) {
			t.Fatalf("events of a server that does not answer: %v %v, want ErrUnreachable", ev, err)
		}
		break
	}
	// an answer is not an outage
	if err := agentq.CheckState("nope"); errors.Is(err, agentq.ErrUnreachable) || !errors.Is(err, agentq.ErrUnknownState) {
		t.Fatalf("CheckState(nope): %v, want ErrUnknownState only", err)
	}
}

// The checks a command makes before it sends anything are the SDK's.
func TestInputIsCheckedBeforeAnythingIsSent(t *testing.T) {
	for key, ok := range map[string]bool{"order-1234": true, "": false, strings.Repeat("k", 256): false, "a\x01b": false} {
		if err := agentq.CheckIdempotencyKey(key); (err == nil) != ok || (err != nil && !errors.Is(err, agentq.ErrBadIdempotencyKey)) {
			t.Errorf("CheckIdempotencyKey(%q): %v, want ok=%v (else ErrBadIdempotencyKey)", key, err, ok)
		}
	}
	for state, ok := range map[string]bool{"": true, agentq.StateRunning: true, agentq.StateTimedOut: true, "runing": false} {
		if err := agentq.CheckState(state); (err == nil) != ok {
			t.Errorf("CheckState(%q): %v, want ok=%v", state, err, ok)
		}
	}
}

// Config.ParseSpec checks a spec against the configuration without a
// connection, reading output.schema paths from the directory given.
func TestConfigParsesASpecWithItsSchemaDirectory(t *testing.T) {
	cfg := configFor(t, "127.0.0.1:1") // no Redis there: nothing is reached
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "answer.schema.yaml"), []byte("type: object\nrequired: [city]\nproperties:\n  city: { type: string }\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	y := []byte("name: s\nsteps:\n  - id: a\n    route: solo\n    prompt: \"Which city?\"\n    output: { format: json, schema: answer.schema.yaml }\n")
	s, err := cfg.ParseSpec("s.yaml", y, dir)
	if err != nil || len(s.Steps) != 1 {
		t.Fatalf("ParseSpec with the schema's directory: %v", err)
	}
	if _, err := cfg.ParseSpec("s.yaml", y, t.TempDir()); err == nil || !strings.Contains(err.Error(), "answer.schema.yaml") {
		t.Fatalf("ParseSpec without the schema file: %v, want the path named", err)
	}
	bad := []byte("name: s\nsteps:\n  - { id: a, route: nowhere, prompt: hi }\n")
	if _, err := cfg.ParseSpec("s.yaml", bad, ""); !errors.Is(err, agentq.ErrInvalidSpec) || !strings.Contains(err.Error(), "s.yaml:3") {
		t.Fatalf("a spec naming an unknown route: %v, want ErrInvalidSpec at s.yaml:3", err)
	}
	if _, err := (agentq.Config{}).ParseSpec("s.yaml", y, dir); err == nil {
		t.Fatal("the empty Config parsed a spec")
	}
}

// A server client with a configuration prices workflows with its prices
// (and the empty Config is the defaults, as NewServerClient's).
func TestAServerClientWithAConfiguration(t *testing.T) {
	priced, err := agentq.ParseConfigWith("p.yaml", []byte("prices:\n  oa/m-oa: { prompt_per_mtok: 2.0, completion_per_mtok: 8.0 }\n"), func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	wf := &agentq.Workflow{Steps: []agentq.StepRecord{{ID: "a", Target: "oa/m-oa"}}}
	wf.Steps[0].Usage.PromptTokens, wf.Steps[0].Usage.CompletionTokens = 1_000_000, 500_000
	for _, c := range []struct {
		name   string
		c      *agentq.Client
		priced bool
	}{
		{"with prices", agentq.NewServerClientWithConfig(priced, "http://127.0.0.1:1", ""), true},
		{"the empty Config", agentq.NewServerClientWithConfig(agentq.Config{}, "http://127.0.0.1:1", ""), false},
		{"NewServerClient", agentq.NewServerClient("http://127.0.0.1:1", ""), false},
	} {
		usd, ok := c.c.Cost(wf)
		if c.c.Priced() != c.priced || ok != c.priced || (c.priced && usd != 6) {
			t.Errorf("%s: Priced %v, Cost %v %v; want priced=%v (6 USD)", c.name, c.c.Priced(), usd, ok, c.priced)
		}
	}
	if by := agentq.CostByProvider(&agentq.Workflow{CostByProvider: map[string]float64{"oa": 0.5}}); by["oa"] != 0.5 {
		t.Errorf("CostByProvider: %v", by)
	}
}
