package chaoscli_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentq/agentq/internal/chaoscli"
	"github.com/agentq/agentq/internal/chaosllm"
)

func TestServesScenarioUntilCanceled(t *testing.T) {
	sc := filepath.Join(t.TempDir(), "s.yaml")
	os.WriteFile(sc, []byte("phases:\n  - fault: { status: 503 }\n"), 0o600)
	ctx, cancel := context.WithCancel(context.Background())
	addrc := make(chan string, 1)
	var out bytes.Buffer
	cmd := chaoscli.Command(&out, &bytes.Buffer{}, func(a string) { addrc <- a })
	cmd.SetArgs([]string{"--addr", "127.0.0.1:0", "--scenario", sc})
	done := make(chan error, 1)
	go func() { done <- cmd.ExecuteContext(ctx) }()
	var addr string
	select {
	case addr = <-addrc:
	case err := <-done:
		t.Fatalf("exited: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("not listening within 10s")
	}
	req, _ := http.NewRequest("POST", "http://"+addr+"/v1/chat/completions",
		strings.NewReader(`{"model":"m","messages":[{"role":"user","content":"x"}]}`))
	req.Header.Set("Authorization", "Bearer any-key")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 503 {
		t.Fatalf("status %d, want the scenario's 503", resp.StatusCode)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("shutdown: %v", err)
	}
	if !strings.Contains(out.String(), "chaosllm listening on http://"+addr+" (1 timelines)") {
		t.Fatalf("output %q", out.String())
	}
}

func TestBadScenarioIsUsageError(t *testing.T) {
	sc := filepath.Join(t.TempDir(), "s.yaml")
	os.WriteFile(sc, []byte("phases:\n  - { endpoint: nope }\n"), 0o600)
	cmd := chaoscli.Command(&bytes.Buffer{}, &bytes.Buffer{}, nil)
	cmd.SetArgs([]string{"--scenario", sc})
	err := cmd.ExecuteContext(context.Background())
	if !errors.Is(err, chaoscli.ErrUsage) || !strings.Contains(err.Error(), `phases[0].endpoint: "nope"`) {
		t.Fatalf("err = %v", err)
	}
}

// The scenario files --help names exist and load.
func TestHelpExamplesNameRealScenarios(t *testing.T) {
	cmd := chaoscli.Command(io.Discard, io.Discard, nil)
	n := 0
	for _, f := range strings.Fields(cmd.Example) {
		if !strings.HasSuffix(f, ".yaml") {
			continue
		}
		n++
		data, err := os.ReadFile(filepath.Join("..", "..", f))
		if err == nil {
			_, err = chaosllm.ParseScenario(data)
		}
		if err != nil {
			t.Errorf("chaosllm --help names %s: %v", f, err)
		}
	}
	if n == 0 {
		t.Fatal("chaosllm --help names no scenario file")
	}
}
