package agentq

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// Decode reads a step's JSON output into a T: a code step's value, or a
// format: json answer, as a record holds it (StepRecord.Output, a
// Result's Final step's, an Instances page's) or a step sees it
// (StepView.Output, from Step.Step or Step.Outputs). White space around
// it and one Markdown code fence (```json … ```) are allowed, as in a
// format: json answer; prose is not. Decoding is encoding/json's, with
// numbers into an any as json.Number (exact, however large the integer).
// An output that is empty, not JSON, or does not fit T is an error that
// quotes its start and names T; in a step, return DeadLetter(err) for an
// ancestor's output that does not fit: no retry changes it.
//
//	type Row struct{ Region string; Total float64 }
//	rows, err := agentq.Decode[[]Row](res.Final[0].Output)
func Decode[T any](output string) (T, error) {
	var v T
	text := unfence(output)
	if text == "" {
		return v, fmt.Errorf("agentq.Decode: the output is empty, not JSON (a missing or degraded step has none)")
	}
	if err := decodeJSON([]byte(text), &v); err != nil {
		return v, fmt.Errorf("agentq.Decode: output %s does not fit %T: %w", excerpt(text), v, err)
	}
	return v, nil
}

// DecodeOutputs reads a map step's outputs, in item order, into a T each:
// the Outputs of the StepView a step sees of a map ancestor its with:
// reads (StepView.Map.Outputs), each instance's JSON value, or its text
// for a prompt instance without format: json. A missing instance (an
// optional one that was dead-lettered: nil in Outputs) is T's zero value,
// so use a pointer T to tell it apart, or read Map.Missing. An output that
// does not fit T is an error naming its index. Decode[[]T] reads the same
// outputs from their JSON text (Map.Output()); Step.Outputs reads them a
// page at a time, for a map too wide to hold whole.
//
//	v, _ := s.Step("per_region")
//	totals, err := agentq.DecodeOutputs[*Total](v.Map.Outputs) // nil where missing
func DecodeOutputs[T any](outputs []any) ([]T, error) {
	out := make([]T, len(outputs))
	for i, o := range outputs {
		if o == nil {
			continue
		}
		b, err := json.Marshal(o)
		if err != nil {
			return nil, fmt.Errorf("agentq.DecodeOutputs: output %d (%T) is not a JSON value: %w", i, o, err)
		}
		if err := decodeJSON(b, &out[i]); err != nil {
			return nil, fmt.Errorf("agentq.DecodeOutputs: output %d %s does not fit %T: %w", i, excerpt(string(b)), out[i], err)
		}
	}
	return out, nil
}

// decodeJSON is json.Unmarshal with numbers into an any as json.Number,
// and nothing after the value.
func decodeJSON(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return errors.New("more after the JSON value")
	}
	return nil
}

// unfence is text without the white space around it and, when it is one
// Markdown code fence, without the fence and its language tag.
func unfence(text string) string {
	t := strings.TrimSpace(text)
	if len(t) >= 6 && strings.HasPrefix(t, "```") && strings.HasSuffix(t, "```") {
		t = strings.TrimSpace(strings.TrimSuffix(t[3:], "```"))
		if i := strings.IndexByte(t, '\n'); i >= 0 && !strings.ContainsAny(t[:i], "{[\"") {
			t = strings.TrimSpace(t[i+1:]) // the fence's language tag
		}
	}
	return t
}

// excerpt is the start of a text, quoted, for an error.
func excerpt(s string) string {
	const max = 120
	if len(s) > max {
		s = strings.ToValidUTF8(s[:max], "") + "…"
	}
	return fmt.Sprintf("%q", s)
}
