package record

import "encoding/json"

// RawJSON is text that holds a JSON array or object (a step's tool calls,
// kept as the model made them). It is written into JSON as the document
// itself, an array and not a string holding one; any other text is written
// as a string, so nothing is lost. Reading accepts either form.
type RawJSON string

// MarshalJSON writes the document itself when it is an array or an
// object (what reading tells from a string), else the text as a string.
func (r RawJSON) MarshalJSON() ([]byte, error) {
	if len(r) > 0 && (r[0] == '[' || r[0] == '{') && json.Valid([]byte(r)) {
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
