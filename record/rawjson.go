package record

import "encoding/json"

// RawJSON is text that holds a JSON document (a step's tool calls, kept as
// the model made them). It is written into JSON as the document itself,
// an array and not a string holding one; text that is not JSON is written
// as a string, so nothing is lost. Reading accepts either form.
type RawJSON string

// MarshalJSON writes the document itself.
func (r RawJSON) MarshalJSON() ([]byte, error) {
	if json.Valid([]byte(r)) {
		return []byte(r), nil
	}
	return json.Marshal(string(r))
}

// UnmarshalJSON reads a document, or a string holding one (the older form).
func (r *RawJSON) UnmarshalJSON(b []byte) error {
	var s string
	if len(b) > 0 && b[0] == '"' {
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		*r = RawJSON(s)
		return nil
	}
	*r = RawJSON(b)
	return nil
}
