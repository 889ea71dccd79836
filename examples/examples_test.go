package examples_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/agentq/agentq/internal/config"
	"github.com/agentq/agentq/tasks"
)

// Every example spec must parse and validate.
func TestExamplesAreValid(t *testing.T) {
	files, _ := filepath.Glob("*.yaml")
	n := 0
	for _, f := range files {
		if f == "agentq.yaml" {
			continue
		}
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tasks.ParseSpec(f, data, nil, tasks.Limits{}); err != nil {
			t.Errorf("%s: %v", f, err)
		}
		n++
	}
	if n < 3 {
		t.Fatalf("found %d example specs, want at least 3", n)
	}
}

func TestExampleConfigIsValid(t *testing.T) {
	env := func(k string) (string, bool) { return "sk-example", k == "OPENAI_API_KEY" }
	cfg, err := config.Load(config.Input{Path: "agentq.yaml", LookupEnv: env})
	if err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile("hello.yaml")
	if _, err := tasks.ParseSpec("hello.yaml", data, map[string]bool{"default": cfg.Routes["default"].Targets != nil}, tasks.Limits{}); err != nil {
		t.Fatalf("hello.yaml against agentq.yaml: %v", err)
	}
}
