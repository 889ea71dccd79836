package main

import (
	"slices"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/agentq/agentq/internal/shard"
)

func TestPrintsShardNamesAsValues(t *testing.T) {
	var b strings.Builder
	if err := run(&b, []string{"search=6", "Batch_2=128"}); err != nil {
		t.Fatal(err)
	}
	var v struct {
		Worker struct {
			Keda struct {
				ShardNames map[string][]string `yaml:"shardNames"`
			} `yaml:"keda"`
		} `yaml:"worker"`
	}
	if err := yaml.Unmarshal([]byte(b.String()), &v); err != nil {
		t.Fatalf("%v\n%s", err, b.String())
	}
	got := v.Worker.Keda.ShardNames
	if len(got) != 2 || !slices.Equal(got["search"], shard.Names("search", 6)) || !slices.Equal(got["Batch_2"], shard.Names("Batch_2", 128)) {
		t.Errorf("printed %v", got)
	}
}

func TestRefusesBadArguments(t *testing.T) {
	for arg, want := range map[string]string{"search": "want QUEUE=N", "search=x": "want QUEUE=N", "a.b=2": "not a queue name",
		"search=1": "want 2 to 128", "search=129": "want 2 to 128"} {
		err := run(&strings.Builder{}, []string{arg})
		if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), arg) {
			t.Errorf("%s: %v, want %q", arg, err, want)
		}
	}
	if err := run(&strings.Builder{}, nil); err == nil {
		t.Error("no argument accepted")
	}
}
