package flow_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/agentq/agentq/internal/flow"
	"github.com/agentq/agentq/internal/problem"
	"github.com/agentq/agentq/internal/spec"
)

func TestNotifySpec(t *testing.T) {
	s, err := spec.ParseSpec("n.yaml", []byte(`
name: n
notify: { url: "https://hooks.example.com/in?k=1", events: [completed, timed_out] }
steps: [ { id: a, route: r, prompt: p } ]
`), nil, spec.DefaultLimits())
	if err != nil || s.Notify == nil || s.Notify.URL != "https://hooks.example.com/in?k=1" || len(s.Notify.Events) != 2 {
		t.Fatalf("%+v %v", s, err)
	}
	js, err := spec.ParseSpec("n.json", []byte(`{"name":"n","notify":{"url":"http://127.0.0.1:9/x"},"steps":[{"id":"a","route":"r","prompt":"p"}]}`), nil, spec.DefaultLimits())
	if err != nil || js.Notify == nil || js.Notify.Events != nil {
		t.Fatalf("JSON: %+v %v", js, err)
	}
	for name, c := range map[string]struct{ notify, want string }{
		"bad url":       {`{ url: "ftp://x" }`, `n.yaml:3: notify.url: "ftp://x" is not an http(s) URL`},
		"no url":        {`{ events: [failed] }`, `n.yaml:3: notify.url: is empty`},
		"unknown event": {"\n  url: https://x.example/\n  events: [completed, done]", `n.yaml:5: notify.events[1]: unknown event "done" (want completed, blocked, failed, timed_out, canceled)`},
		"unknown field": {`{ url: "https://x.example/", retries: 3 }`, `n.yaml:3: notify.retries: unknown field`},
		"not a mapping": {`https://x.example/`, `n.yaml:3: notify: want a mapping`},
	} {
		_, err := spec.ParseSpec("n.yaml", []byte("name: n\nsteps: [ { id: a, route: r, prompt: p } ]\nnotify: "+c.notify+"\n"), nil, spec.DefaultLimits())
		lines := problem.Lines(err)
		if !errors.Is(err, spec.ErrInvalidSpec) || len(lines) != 1 || !strings.HasPrefix(lines[0], c.want) {
			t.Errorf("%s: %q, want one problem starting %q", name, lines, c.want)
		}
	}
	var off *flow.Webhooks
	err = off.Check("n.yaml", s)
	var se *spec.SpecError
	if !errors.As(err, &se) || !errors.Is(err, spec.ErrInvalidSpec) || !strings.HasPrefix(err.Error(), "n.yaml:3: notify: webhooks are not configured") {
		t.Errorf("notify without webhooks configured: %v", err)
	}
	if err := (&flow.Webhooks{}).Check("n.yaml", s); err != nil {
		t.Errorf("webhooks configured: %v", err)
	}
}
