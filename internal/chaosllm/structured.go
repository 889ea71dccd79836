package chaosllm

import (
	"encoding/json"
	"sort"
)

// jsonAnswer is the answer to a request for JSON: an instance of schema
// (every property it names, required or not, filled by type, strings with
// the reply text), or {"answer": reply} without a schema.
func jsonAnswer(schema map[string]any, reply string) string {
	var v any = map[string]any{"answer": reply}
	if schema != nil {
		v = instance(schema, reply, 0)
	}
	b, _ := json.Marshal(v)
	return string(b)
}

// instance builds a value that satisfies the common schema keywords:
// type, properties, items, enum, const, minItems.
func instance(s map[string]any, text string, depth int) any {
	if c, ok := s["const"]; ok {
		return c
	}
	if e, ok := s["enum"].([]any); ok && len(e) > 0 {
		return e[0]
	}
	typ, _ := s["type"].(string)
	if ts, ok := s["type"].([]any); ok && len(ts) > 0 {
		typ, _ = ts[0].(string)
	}
	if typ == "" {
		if _, ok := s["properties"]; ok {
			typ = "object"
		}
	}
	if depth > 8 {
		return nil
	}
	switch typ {
	case "object":
		props, _ := s["properties"].(map[string]any)
		names := make([]string, 0, len(props))
		for n := range props {
			names = append(names, n)
		}
		sort.Strings(names)
		o := map[string]any{}
		for _, n := range names {
			if ps, ok := props[n].(map[string]any); ok {
				o[n] = instance(ps, text, depth+1)
			}
		}
		return o
	case "array":
		items, _ := s["items"].(map[string]any)
		n := 1
		if m, ok := s["minItems"].(float64); ok && int(m) > n {
			n = int(m)
		}
		a := make([]any, n)
		for i := range a {
			a[i] = instance(items, text, depth+1)
		}
		return a
	case "integer":
		return 1
	case "number":
		return 1.5
	case "boolean":
		return true
	case "null":
		return nil
	}
	return text
}

// badOutput is the unusable answer a fault of kind asks for, when kind is
// one of the structured-output faults: to a request for JSON, ok is true.
// Other requests get their normal answer (ok with the good text).
func badOutput(kind string, req request, good string) (string, bool) {
	switch kind {
	case KindBadJSON, KindProseJSON, KindTruncatedJSON:
		if !req.json {
			return good, true
		}
	}
	switch kind {
	case KindBadJSON:
		// an array where the schema wants anything else, else an object
		if t, _ := req.schema["type"].(string); t == "array" {
			return `{"chaosllm": "this answer breaks the schema"}`, true
		}
		return `["chaosllm", "this answer breaks the schema"]`, true
	case KindProseJSON:
		return "Sure! Here is the JSON you asked for:\n" + good + "\nLet me know if you need anything else.", true
	case KindTruncatedJSON:
		return good[:len(good)/2], true
	}
	return "", false
}
