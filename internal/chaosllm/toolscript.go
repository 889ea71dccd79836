package chaosllm

import (
	"encoding/json"
	"fmt"

	"gopkg.in/yaml.v3"
)

// ScriptTurn is what the model does at one turn of a tool conversation:
// the calls it makes, and some text with them if Text is set. A request's
// turn is 1 + the number of assistant messages it holds; a request that
// offers tools at a scripted turn gets that turn's calls, and one past the
// last scripted turn gets the final text answer, which names every tool
// result the conversation holds.
type ScriptTurn struct {
	// Turn is the turn's number; turns count 1, 2, … in the script's
	// order, and 0 means the turn's place in that order.
	Turn int `yaml:"turn" json:"turn"`
	// Text is sent with the calls (OpenAI content, an Anthropic text block
	// before the tool_use blocks); empty: none.
	Text string `yaml:"text" json:"text"`
	// Calls are the tool calls, at least one, in order.
	Calls []ScriptCall `yaml:"calls" json:"calls"`

	line int // where the turn is in the scenario's YAML; 0 if unknown
}

// ScriptCall is one scripted tool call. Name need not be a tool the
// request offered and Arguments need not match the tool's schema: a
// script can test how a caller handles an unknown tool or bad arguments.
type ScriptCall struct {
	Name string `yaml:"name" json:"name"`
	// Arguments are sent as the call's JSON object; nil: {}.
	Arguments map[string]any `yaml:"arguments" json:"arguments"`

	line int
}

// UnmarshalYAML reads a turn and remembers its line.
func (t *ScriptTurn) UnmarshalYAML(n *yaml.Node) error {
	if err := knownKeys(n, "turn", "text", "calls"); err != nil {
		return err
	}
	type plain ScriptTurn
	var p plain
	if err := n.Decode(&p); err != nil {
		return err
	}
	*t = ScriptTurn(p)
	t.line = n.Line
	return nil
}

// UnmarshalYAML reads a call and remembers its line.
func (c *ScriptCall) UnmarshalYAML(n *yaml.Node) error {
	if err := knownKeys(n, "name", "arguments"); err != nil {
		return err
	}
	type plain ScriptCall
	var p plain
	if err := n.Decode(&p); err != nil {
		return err
	}
	*c = ScriptCall(p)
	c.line = n.Line
	return nil
}

// knownKeys refuses a mapping key outside keys: a node decoded by a custom
// unmarshaler does not inherit the parser's known-fields check.
func knownKeys(n *yaml.Node, keys ...string) error {
	if n.Kind != yaml.MappingNode {
		return nil // Decode says what is wrong with it
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k := n.Content[i]
		ok := false
		for _, want := range keys {
			ok = ok || k.Value == want
		}
		if !ok {
			return fmt.Errorf("line %d: field %s is not one of %v", k.Line, k.Value, keys)
		}
	}
	return nil
}

// validateScript checks a tool script: turns numbered in order from 1,
// each with calls that have a name and arguments that can be sent as JSON.
func validateScript(script []ScriptTurn) error {
	for i, t := range script {
		where := fmt.Sprintf("scenario: tool_script[%d]", i)
		if t.Turn != 0 && t.Turn != i+1 {
			return fmt.Errorf("%s.turn%s: %d, want %d (turns count 1, 2, … in order)", where, atLine(t.line), t.Turn, i+1)
		}
		if len(t.Calls) == 0 {
			return fmt.Errorf("%s.calls%s: a scripted turn needs a call (the turn after the last scripted one answers with text)", where, atLine(t.line))
		}
		for j, c := range t.Calls {
			cw := fmt.Sprintf("%s.calls[%d]", where, j)
			if c.Name == "" {
				return fmt.Errorf("%s.name%s: empty", cw, atLine(c.line))
			}
			if _, err := json.Marshal(c.Arguments); err != nil {
				return fmt.Errorf("%s.arguments%s: cannot be sent as JSON: %w", cw, atLine(c.line), err)
			}
		}
	}
	return nil
}

// atLine names a line of the scenario's YAML, when it is known.
func atLine(line int) string {
	if line == 0 {
		return ""
	}
	return fmt.Sprintf(" (line %d)", line)
}

// scriptedCalls are a turn's calls as the wire carries them, with ids
// unique to the answer id.
func scriptedCalls(t ScriptTurn, id string) []toolCall {
	calls := make([]toolCall, len(t.Calls))
	for i, c := range t.Calls {
		args := []byte("{}")
		if c.Arguments != nil {
			args, _ = json.Marshal(c.Arguments) // validated
		}
		calls[i] = toolCall{id: fmt.Sprintf("%s_%d", id, i+1), name: c.Name, args: string(args)}
	}
	return calls
}
