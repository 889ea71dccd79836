package spec

import (
	"strings"
	"testing"
	"time"

	"github.com/agentq/agentq/internal/problem"
	"gopkg.in/yaml.v3"
)

// Every wait is bounded: wait_for.timeout, approve.timeout and deadline
// are over 0s and at most limits.max_wait, refused otherwise naming the
// field and the limit; left out, a wait takes its default (and a default
// over the limit must be set).
func TestWaitsAreWithinMaxWait(t *testing.T) {
	signal := "name: x\nsteps:\n  - id: pay\n    wait_for: { signal: paid, timeout: %s }\n"
	approve := "name: x\nsteps:\n  - id: ok\n    approve: { message: proceed, timeout: %s }\n"
	deadline := "name: x\ndeadline: %s\nsteps:\n  - { id: a, route: report, prompt: hi }\n"
	f := func(format, v string) string { return strings.Replace(format, "%s", v, 1) }
	wantOneProblem(t, []struct{ name, spec, want string }{
		{"signal over", f(signal, "876000h"), "w.yaml:4: steps[0] (pay).wait_for.timeout: 876000h is over limits.max_wait (168h)"},
		{"signal zero", f(signal, "0s"), "steps[0] (pay).wait_for.timeout: 0s is not a wait: give one of 1s to limits.max_wait (168h), or leave it out for the default (24h)"},
		{"signal negative", f(signal, "-5m"), "steps[0] (pay).wait_for.timeout: -5m0s is under 1s"},
		{"approval over", f(approve, "169h"), "steps[0] (ok).approve.timeout: 169h is over limits.max_wait (168h)"},
		{"approval zero", f(approve, "0s"), "steps[0] (ok).approve.timeout: 0s is not a wait"},
		{"approval block", "name: x\nsteps:\n  - id: ok\n    approve:\n      message: proceed\n      timeout: 0h\n", "steps[0] (ok).approve.timeout: 0s is not a wait"},
		{"deadline over", f(deadline, "876000h"), "w.yaml:2: deadline: 876000h is over limits.max_wait (168h)"},
		{"deadline zero", f(deadline, "0s"), "deadline: 0s is not a wait: give one of 1s to limits.max_wait (168h), or leave it out for none"},
		{"json", `{"name": "x", "steps": [{"id": "pay", "wait_for": {"signal": "paid", "timeout": "0s"}}]}`, "steps[0] (pay).wait_for.timeout: 0s is not a wait"},
	})
	for _, good := range []string{f(signal, "168h"), f(approve, "1s"), f(deadline, "10m"),
		"name: x\nsteps:\n  - { id: pay, wait_for: { signal: paid } }\n  - { id: ok, approve: { message: proceed } }\n"} {
		if _, err := ParseSpec("w.yaml", []byte(good), routes, DefaultLimits()); err != nil {
			t.Errorf("%q: %v", good, err)
		}
	}

	// a limit under a default: the wait left out must be set
	lim := DefaultLimits()
	lim.MaxWait = time.Hour
	_, err := ParseSpec("w.yaml", []byte("name: x\nsteps:\n  - { id: pay, wait_for: { signal: paid } }\n  - { id: ok, approve: { message: proceed, timeout: 1h } }\n"), routes, lim)
	if lines := problem.Lines(err); len(lines) != 1 || !strings.Contains(lines[0], "steps[0] (pay).wait_for.timeout: is unset and its default 24h is over limits.max_wait (1h): set it") {
		t.Fatalf("got %q", lines)
	}
	// no limit (a caller without a configuration): not checked
	lim.MaxWait = 0
	if _, err := ParseSpec("w.yaml", []byte(f(signal, "876000h")), routes, lim); err != nil {
		t.Fatalf("without limits.max_wait: %v", err)
	}
}

// A spec printed as YAML (enqueue spec show) parses again: a wait left
// out is not written as 0s.
func TestAShownSpecParsesAgain(t *testing.T) {
	s, err := ParseSpec("w.yaml", []byte("name: x\nsteps:\n  - { id: a, route: report, prompt: hi }\n  - { id: pay, wait_for: { signal: paid } }\n  - { id: ok, approve: { message: proceed } }\n"), routes, DefaultLimits())
	if err != nil {
		t.Fatal(err)
	}
	b, err := yaml.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ParseSpec("shown.yaml", b, routes, DefaultLimits()); err != nil {
		t.Fatalf("the shown spec: %v\n%s", err, b)
	}
}
