package spec

import (
	"fmt"
	"slices"

	"gopkg.in/yaml.v3"

	"github.com/agentq/agentq/internal/hookcheck"
)

// NotifySpec asks for a signed POST when the workflow ends
// (docs/webhooks.md): notify: { url: …, events: [completed, failed] }.
type NotifySpec struct {
	URL string `yaml:"url" json:"url"`
	// Events are the ends that are notified: completed, blocked, failed,
	// timed_out, canceled; empty: all of them.
	Events []string `yaml:"events" json:"events,omitempty"`
	line   int
}

// UnmarshalYAML reads notify: and checks it: an http(s) URL, known events,
// no other field; every problem names its field and line.
func (n *NotifySpec) UnmarshalYAML(node *yaml.Node) error {
	if node.Kind != yaml.MappingNode {
		return &yaml.TypeError{Errors: []string{fmt.Sprintf("line %d: notify: want a mapping with url and events", node.Line)}}
	}
	var problems []string
	bad := func(line int, field, format string, a ...any) {
		problems = append(problems, fmt.Sprintf("line %d: notify.%s: %s", line, field, fmt.Sprintf(format, a...)))
	}
	*n = NotifySpec{line: node.Line}
	for i := 0; i+1 < len(node.Content); i += 2 {
		k, v := node.Content[i], node.Content[i+1]
		var err error
		switch k.Value {
		case "url":
			err = v.Decode(&n.URL)
		case "events":
			err = v.Decode(&n.Events)
		default:
			bad(k.Line, k.Value, "unknown field (notify has url and events)")
		}
		if err != nil {
			bad(k.Line, k.Value, "%s", err)
		}
	}
	if err := hookcheck.CheckURL(n.URL); err != nil {
		bad(lineOr(keyLine(node, "url"), node.Line), "url", "%v", err)
	}
	if i, ev := hookcheck.CheckEvents(n.Events); i >= 0 {
		bad(lineOr(keyLine(node, "events"), node.Line), fmt.Sprintf("events[%d]", i), "unknown event %q (want %s)", ev, hookcheck.EventsHelp())
	}
	if len(problems) > 0 {
		return &yaml.TypeError{Errors: problems}
	}
	return nil
}

// NotifyWants reports whether n notifies event.
func NotifyWants(n *NotifySpec, event string) bool {
	return n != nil && slices.Contains(hookcheck.Events, event) && (len(n.Events) == 0 || slices.Contains(n.Events, event))
}

// NotifyLine is the line of notify's mapping in the spec's source.
func NotifyLine(n *NotifySpec) int { return n.line }
