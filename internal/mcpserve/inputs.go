package mcpserve

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"unicode/utf8"

	"github.com/google/jsonschema-go/jsonschema"
)

// The tools' arguments. Each mirrors a JSON API operation
// (internal/dashboard/openapi.json) by its parameters' and body fields'
// names and JSON types; the comments name the operation. A field the
// operation lacks is one of mcpOnly's (schema_test.go).

// SubmitInput is submit_workflow's: POST /api/v1/workflows (the body is
// spec; input, check and deadline its query; idempotency_key its
// Idempotency-Key header), and the wait.
type SubmitInput struct {
	Spec           string   `json:"spec" jsonschema:"the workflow spec, YAML or JSON text (name:, steps:, …)"`
	Input          []string `json:"input,omitempty" jsonschema:"inputs as key=value, each over the spec's input: of that key"`
	Check          *bool    `json:"check,omitempty" jsonschema:"false: submit without checking the spec against what live workers serve (its steps wait until a worker that serves them starts); default true"`
	Deadline       string   `json:"deadline,omitempty" jsonschema:"bound the whole workflow to this long from now, a Go duration of at least 1s (10m, 1h30m), over the spec's deadline:"`
	IdempotencyKey string   `json:"idempotency_key,omitempty" jsonschema:"submit at most once per key (1 to 255 bytes): a later submit with it returns the same workflow (existing: true); the key with another spec or input is refused"`
	Wait           bool     `json:"wait,omitempty" jsonschema:"wait until the workflow ends, waits for a person's decision, is blocked on a dead letter, or wait_seconds pass; with a progress token, its steps' progress comes as notifications/progress"`
	WaitSeconds    int      `json:"wait_seconds,omitempty" jsonschema:"with wait, the longest to wait in seconds (default 60; at most the server's bound, 600 unless configured)"`
}

// IDInput is workflow_status's (GET /api/v1/workflows/{id}),
// workflow_result's (GET /api/v1/workflows/{id}/result) and
// cancel_workflow's (POST /api/v1/workflows/{id}/cancel).
type IDInput struct {
	ID string `json:"id" jsonschema:"the workflow's id (wf_…)"`
}

// ListInput is list_workflows': GET /api/v1/workflows with its query.
type ListInput struct {
	State string `json:"state,omitempty" jsonschema:"only workflows in this state: pending, running, waiting, blocked, completed, failed, canceled, timed_out"`
	Name  string `json:"name,omitempty" jsonschema:"only workflows of this name (the spec's name:)"`
	Limit int    `json:"limit,omitempty" jsonschema:"at most this many, 1 to 1000 (default 50)"`
	After string `json:"after,omitempty" jsonschema:"the last id of the previous page (next_after of the previous call)"`
}

// DecisionInput is approve_step's and reject_step's: POST
// /api/v1/workflows/{id}/steps/{step}/decision, whose body's approve the
// tool's name says.
type DecisionInput struct {
	ID      string `json:"id" jsonschema:"the workflow's id (wf_…)"`
	Step    string `json:"step" jsonschema:"the approval step's id (a step with approve: in the spec)"`
	Comment string `json:"comment,omitempty" jsonschema:"why: kept with the decision, read by the step's dependents"`
}

// SignalInput is send_signal's: POST /api/v1/signals (its body, and its
// Idempotency-Key header as idempotency_key).
type SignalInput struct {
	Name           string `json:"name" jsonschema:"the signal's name (a letter or digit, then letters, digits, _ . : / -; at most 200 bytes)"`
	Match          string `json:"match,omitempty" jsonschema:"the value the waiting steps' wait_for.match renders to (at most 1024 bytes, no control characters)"`
	Data           any    `json:"data,omitempty" jsonschema:"any JSON value (default null): the completed steps' output"`
	IdempotencyKey string `json:"idempotency_key,omitempty" jsonschema:"a second send of the key (same name and match) within the retention does nothing and answers the first send's id with duplicate: true"`
}

// schemaFor is T's input schema, generated from its fields.
func schemaFor[T any]() (*jsonschema.Schema, error) {
	s, err := jsonschema.For[T](nil)
	if err != nil {
		return nil, err
	}
	if s.Type != "object" {
		return nil, fmt.Errorf("%T's schema is not an object", *new(T))
	}
	return s, nil
}

// badInput is an argument the tool cannot use: its message is one line
// naming the argument.
type badInput struct{ msg string }

func (e *badInput) Error() string { return e.msg }

func badInputf(format string, a ...any) error { return &badInput{fmt.Sprintf(format, a...)} }

// decodeArgs reads a call's arguments (a JSON object, or nothing) into in,
// checked against the tool's schema s: an unknown or missing argument, or
// one of the wrong JSON type, is a badInput naming it.
func decodeArgs(raw json.RawMessage, s *jsonschema.Schema, in any) error {
	if len(bytes.TrimSpace(raw)) == 0 || bytes.Equal(bytes.TrimSpace(raw), []byte("null")) {
		raw = []byte("{}")
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fields); err != nil {
		return badInputf("the arguments are not a JSON object")
	}
	for k := range fields {
		if _, ok := s.Properties[k]; !ok {
			return badInputf("unknown argument %q (the arguments are %s)", bound(k, 64), strings.Join(s.PropertyOrder, ", "))
		}
	}
	for _, k := range s.Required {
		if _, ok := fields[k]; !ok {
			return badInputf("argument %q is missing", k)
		}
	}
	if err := json.Unmarshal(raw, in); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			name := te.Field
			if name == "" {
				name = "?"
			}
			return badInputf("argument %q: want %s, not a JSON %s", name, jsonKind(te.Type), te.Value)
		}
		return badInputf("the arguments are not a JSON object: %v", err)
	}
	return nil
}

// jsonKind names the JSON a Go type decodes from.
func jsonKind(t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "an integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Slice, reflect.Array:
		return "an array"
	case reflect.Map, reflect.Struct:
		return "an object"
	}
	return "another type"
}

// bound cuts s to n bytes (on a rune boundary), marking the cut.
func bound(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}
