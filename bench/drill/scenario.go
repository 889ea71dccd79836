package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/agentq/agentq/internal/chaosllm"
)

// Scenario is one drill file (bench/scenarios/*.yaml).
type Scenario struct {
	Name  string `yaml:"name"`
	About string `yaml:"about"`
	// Duration is how long workflows are submitted, at Rate per second.
	Duration duration `yaml:"duration"`
	Rate     float64  `yaml:"rate"`
	// Drain is how long to wait for the rest once submission stops.
	Drain duration `yaml:"drain"`
	// Workers in-process agentq workers (each its own asynq server and
	// Redis pool) of Concurrency each; the naive baseline gets
	// Workers×Concurrency goroutines.
	Workers     int `yaml:"workers"`
	Concurrency int `yaml:"concurrency"`
	// Providers each get their own chaosllm (one for agentq, one for the
	// baseline, both on the same timeline).
	Providers []Provider `yaml:"providers"`
	// Route is agentq's route "drill" (targets, strategy, fallback_text…),
	// Resilience agentq's resilience section, both as in agentq.yaml.
	Route      yaml.Node `yaml:"route"`
	Resilience yaml.Node `yaml:"resilience"`
	// Workflow is the spec every submission runs (route drill).
	Workflow yaml.Node `yaml:"workflow"`
	// Naive is the baseline's one target; empty: the route's first.
	Naive struct {
		Provider string `yaml:"provider"`
		Model    string `yaml:"model"`
	} `yaml:"naive"`
}

// Provider is one fake provider.
type Provider struct {
	Name    string   `yaml:"name"`
	Keys    []string `yaml:"keys"`
	Timeout string   `yaml:"timeout"`
	// Down is when the provider is out, from the drill's start, for the
	// report's reaction times; nil: never.
	Down *struct {
		From duration `yaml:"from"`
		To   duration `yaml:"to"`
	} `yaml:"down"`
	Chaos yaml.Node `yaml:"chaos"` // a chaosllm scenario
	chaos chaosllm.Scenario
}

type duration time.Duration

func (d *duration) UnmarshalYAML(n *yaml.Node) error {
	v, err := time.ParseDuration(n.Value)
	if err != nil {
		return fmt.Errorf("line %d: %q is not a duration", n.Line, n.Value)
	}
	*d = duration(v)
	return nil
}

func (d duration) D() time.Duration { return time.Duration(d) }

// loadScenario reads and checks a drill file.
func loadScenario(path string) (*Scenario, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var sc Scenario
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&sc); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if err := sc.validate(); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &sc, nil
}

func (sc *Scenario) validate() error {
	switch {
	case sc.Name == "":
		return errors.New("name: missing")
	case sc.Duration <= 0 || sc.Drain < 0:
		return errors.New("duration must be positive and drain not negative")
	case sc.Rate <= 0:
		return errors.New("rate: must be positive (workflows per second)")
	case sc.Workers < 1 || sc.Concurrency < 1:
		return errors.New("workers and concurrency must be at least 1")
	case len(sc.Providers) == 0:
		return errors.New("providers: none")
	case sc.Route.Kind == 0 || sc.Workflow.Kind == 0:
		return errors.New("route and workflow are required")
	}
	seen := map[string]bool{}
	for i := range sc.Providers {
		p := &sc.Providers[i]
		if p.Name == "" || seen[p.Name] {
			return fmt.Errorf("providers[%d]: name missing or repeated", i)
		}
		seen[p.Name] = true
		if len(p.Keys) == 0 {
			return fmt.Errorf("providers[%d] (%s).keys: none", i, p.Name)
		}
		if p.Chaos.Kind != 0 {
			b, err := yaml.Marshal(&p.Chaos)
			if err != nil {
				return err
			}
			if p.chaos, err = chaosllm.ParseScenario(b); err != nil {
				return fmt.Errorf("providers[%d] (%s).chaos: %w", i, p.Name, err)
			}
		}
	}
	if sc.Naive.Provider != "" && !seen[sc.Naive.Provider] {
		return fmt.Errorf("naive.provider: %q is not a provider", sc.Naive.Provider)
	}
	return nil
}
