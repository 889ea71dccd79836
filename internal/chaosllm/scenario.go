// Package chaosllm is a fake LLM provider with scripted faults. It speaks
// the OpenAI chat completions and Anthropic messages wire formats, answers
// deterministically from the prompt, and follows a scenario: a timeline of
// phases, each with its latency and its faults.
//
// It shares no code with the clients it tests (llmclient, retry, tasks): a
// fake built from the client's own code would agree with it by construction.
package chaosllm

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"time"

	"gopkg.in/yaml.v3"
)

// Scenario is what the server does, phase after phase. The zero value
// accepts any non-empty key and answers every request at once.
type Scenario struct {
	// Keys are the accepted API keys; empty accepts any non-empty key.
	Keys []string `yaml:"keys" json:"keys"`
	// Phases run in order. A phase ends after Requests matching requests or
	// after Duration, whichever comes first; the last phase never ends.
	// With no phases every request is answered normally.
	Phases []Phase `yaml:"phases" json:"phases"`
}

// Phase is one stretch of the timeline.
type Phase struct {
	Name     string   `yaml:"name" json:"name"`
	Requests int      `yaml:"requests" json:"requests"` // 0: not bounded by count
	Duration Duration `yaml:"duration" json:"duration"` // 0: not bounded by time
	// Endpoint limits the phase's faults to "openai" or "anthropic"; empty
	// means both. Requests to other endpoints are answered normally and do
	// not count towards Requests.
	Endpoint string   `yaml:"endpoint" json:"endpoint"`
	Latency  Duration `yaml:"latency" json:"latency"` // added before answering
	Fault    *Fault   `yaml:"fault" json:"fault"`
}

// Fault is what a request in a phase gets instead of an answer.
type Fault struct {
	// Status is the HTTP status to answer with (429, 500, 503, 529, ...).
	Status int `yaml:"status" json:"status"`
	// Rate is the share of requests that get the fault, 0 < Rate <= 1;
	// 0 means 1. The choice is deterministic: every 1/Rate-th request.
	Rate float64 `yaml:"rate" json:"rate"`
	// Type and Code override the error body's type and code (for example
	// code insufficient_quota on a 429).
	Type string `yaml:"type" json:"type"`
	Code string `yaml:"code" json:"code"`
	// RetryAfter is sent as Retry-After (whole seconds) and retry-after-ms.
	RetryAfter Duration `yaml:"retry_after" json:"retry_after"`
}

// Duration is a time.Duration read from a string such as "1.5s".
type Duration time.Duration

// UnmarshalYAML reads "250ms", "2s" and so on.
func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	v, err := time.ParseDuration(n.Value)
	if err != nil {
		return fmt.Errorf("line %d: bad duration %q", n.Line, n.Value)
	}
	*d = Duration(v)
	return nil
}

// ParseScenario reads a scenario (YAML or JSON) and checks it.
func ParseScenario(data []byte) (Scenario, error) {
	var s Scenario
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&s); err != nil && !errors.Is(err, io.EOF) {
		return Scenario{}, fmt.Errorf("scenario: %w", err)
	}
	return s, s.validate()
}

func (s Scenario) validate() error {
	for i, p := range s.Phases {
		where := fmt.Sprintf("scenario: phases[%d]", i)
		if p.Name != "" {
			where += " (" + p.Name + ")"
		}
		switch p.Endpoint {
		case "", "openai", "anthropic":
		default:
			return fmt.Errorf("%s.endpoint: %q is not openai or anthropic", where, p.Endpoint)
		}
		if p.Requests < 0 || p.Duration < 0 || p.Latency < 0 {
			return fmt.Errorf("%s: requests, duration and latency cannot be negative", where)
		}
		if f := p.Fault; f != nil {
			if f.Status < 400 || f.Status > 599 {
				return fmt.Errorf("%s.fault.status: %d is not an HTTP error status", where, f.Status)
			}
			if f.Rate < 0 || f.Rate > 1 {
				return fmt.Errorf("%s.fault.rate: %v is not in (0, 1]", where, f.Rate)
			}
		}
	}
	return nil
}
