package agentq_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agentq/agentq"
	"github.com/agentq/agentq/internal/chaosllm"
	"github.com/agentq/agentq/internal/poll"
	"github.com/agentq/agentq/internal/redistest"
	"github.com/agentq/agentq/internal/store"
	"github.com/agentq/agentq/internal/testenv"
)

func TestMain(m *testing.M) { os.Exit(redistest.Main(m)) }

// sdkConfig is the test environment's configuration, through the SDK.
func sdkConfig(t *testing.T, e *testenv.Env) agentq.Config {
	t.Helper()
	vars := map[string]string{"CHAOS": e.URL, "K1": testenv.Keys[0], "K2": testenv.Keys[1],
		"AGENTQ_REDIS_ADDR": e.DB.Addr, "AGENTQ_REDIS_DB": strconv.Itoa(e.DB.DB)}
	cfg, err := agentq.ParseConfigWith("testenv.yaml", []byte(testenv.ConfigYAML), func(k string) (string, bool) { v, ok := vars[k]; return v, ok })
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

var regionSchema = json.RawMessage(`{"type":"object","description":"A region's sales figure","required":["region"],"properties":{"region":{"type":"string"}}}`)

// A bad name, a schema that is not an object schema, a nil function and a
// name registered twice are each reported by Run, one line each, before
// it connects to anything.
func TestToolRegistrationProblemsAreReportedByRun(t *testing.T) {
	e := testenv.Start(t, testenv.Options{NoWorker: true})
	w, err := agentq.NewWorker(sdkConfig(t, e))
	if err != nil {
		t.Fatal(err)
	}
	fn := func(ctx context.Context, args json.RawMessage) (any, error) { return "ok", nil }
	w.Tool("fetch figure", regionSchema, fn)
	w.Tool("by_string", json.RawMessage(`{"type":"string"}`), fn)
	w.Tool("no_func", regionSchema, nil)
	w.Tool("twice", regionSchema, fn)
	w.Tool("twice", regionSchema, fn)
	err = w.Run(t.Context())
	want := []string{`Tool("fetch figure"): a tool name is`, `Tool("by_string"): the schema must be a JSON Schema of type object`,
		`Tool("no_func"): the function is nil`, `Tool("twice"): registered twice`}
	if err == nil {
		t.Fatal("Run accepted bad registrations")
	}
	lines := strings.Split(strings.TrimPrefix(err.Error(), "agentq: "), "\n")
	if len(lines) != len(want) {
		t.Fatalf("Run: %q, want %d problems", lines, len(want))
	}
	for i, w := range want {
		if !strings.Contains(lines[i], w) {
			t.Errorf("problem %d: %q, want %q", i, lines[i], w)
		}
	}
}

// A tool registered through the SDK runs for a step that names it: its
// JSON result goes back to the model and is kept with the step.
func TestSDKWorkerRunsTools(t *testing.T) {
	e := testenv.Start(t, testenv.Options{NoWorker: true, Scenario: chaosllm.Scenario{ToolScript: []chaosllm.ScriptTurn{
		{Calls: []chaosllm.ScriptCall{{Name: "fetch_figure", Arguments: map[string]any{"region": "north"}}}}}}})
	w, err := agentq.NewWorker(sdkConfig(t, e))
	if err != nil {
		t.Fatal(err)
	}
	w.Tool("fetch_figure", regionSchema, func(ctx context.Context, args json.RawMessage) (any, error) {
		var a struct{ Region string }
		if err := json.Unmarshal(args, &a); err != nil {
			return nil, err
		}
		return map[string]any{"region": a.Region, "figure": 1200}, nil
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	spec := e.Spec("name: sdk\nsteps:\n  - { id: ask, route: solo, prompt: \"Which region?\", tools: [fetch_figure] }\n")
	var id string
	poll.Until(t, 10*time.Second, func() (bool, string) { // the worker may not have started yet
		id, err = e.Client.Submit(t.Context(), spec)
		return err == nil, fmt.Sprint("submit: ", err)
	})
	wf := e.Wait(t, id, 20*time.Second, store.StateCompleted, store.StateBlocked)
	if want := `final answer using results: {"figure":1200,"region":"north"}`; wf.State != store.StateCompleted || wf.Steps[0].Output != want {
		t.Fatalf("workflow %s, output %q, want %q", wf.State, wf.Steps[0].Output, want)
	}
	var recs []agentq.ToolCallRecord
	if err := json.Unmarshal([]byte(wf.Steps[0].ToolCalls), &recs); err != nil || len(recs) != 1 || recs[0].Name != "fetch_figure" {
		t.Errorf("tool calls %s: %v", wf.Steps[0].ToolCalls, err)
	}
}
