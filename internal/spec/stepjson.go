package spec

import (
	"bytes"
	"encoding/json"
	"errors"
)

// stepJSON is Step without its JSON methods.
type stepJSON Step

// MarshalJSON writes a step as its YAML reads: a registered kind's field
// (Step.Kinds) beside the step's own, so a stored or sent spec parses
// again as it was written.
func (st Step) MarshalJSON() ([]byte, error) {
	b, err := json.Marshal(stepJSON(st))
	if err != nil || len(st.Kinds) == 0 {
		return b, err
	}
	ext, err := json.Marshal(st.Kinds)
	if err != nil {
		return nil, err
	}
	if bytes.Equal(b, []byte("{}")) {
		return ext, nil
	}
	return append(append(b[:len(b)-1], ','), ext[1:]...), nil
}

// UnmarshalJSON reads a step MarshalJSON wrote: the fields of the kinds
// registered here go to Step.Kinds.
func (st *Step) UnmarshalJSON(b []byte) error {
	if err := json.Unmarshal(b, (*stepJSON)(st)); err != nil {
		return err
	}
	if len(kindKeys) == 0 {
		return nil // no kind of this worker's has a field of its own
	}
	var all map[string]json.RawMessage
	if err := json.Unmarshal(b, &all); err != nil {
		return err
	}
	for key := range kindKeys {
		raw, ok := all[key]
		if !ok {
			continue
		}
		var v any
		if err := json.Unmarshal(raw, &v); err != nil {
			return err
		}
		if st.Kinds == nil {
			st.Kinds = map[string]any{}
		}
		st.Kinds[key] = v
	}
	return nil
}

// DecodeJSON is json.Unmarshal with numbers decoded into an any as
// json.Number: every number a step sees as any is one (exact, however
// large the integer; .Int64 or .Float64 reads it).
func DecodeJSON(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return errors.New("invalid character after the JSON value")
	}
	return nil
}
