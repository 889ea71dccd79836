package spec

import (
	"context"
	"fmt"
	"regexp"
	"strings"
)

var handlerPattern = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_.-]{0,63}$`)

// ValidHandlerName reports whether name can name a code step's function
// (a letter, then letters, digits, _, . or -, at most 64).
func ValidHandlerName(name string) bool { return handlerPattern.MatchString(name) }

// ValidSpecName reports whether name can name a stored spec: as a code
// step's function is named.
func ValidSpecName(name string) bool { return handlerPattern.MatchString(name) }

// checkCodeStep checks the fields of a step with run:. A code step has no
// prompt of its own (its function may ask the model through the router):
// the fields that shape a prompt's call are refused (codeKind.takes).
func checkCodeStep(st *Step, where string, bad func(line int, where, format string, a ...any)) {
	if !handlerPattern.MatchString(st.Run) {
		bad(st.line, where+".run", "%q is not a function name (a letter, then letters, digits, _, . or -, at most 64)", st.Run)
	}
	if err := checkWithValue(st.With, "with"); err != nil {
		bad(lineOr(st.withLine, st.line), where+"."+err.path, "%s", err.msg)
	}
}

type withError struct{ path, msg string }

// checkWithValue accepts what JSON can hold: maps with string keys, lists,
// strings, numbers, booleans and null.
func checkWithValue(v any, path string) *withError {
	switch x := v.(type) {
	case nil, string, bool, int, int64, uint64, float64:
		return nil
	case map[string]any:
		for _, k := range sortedKeys(x) {
			if err := checkWithValue(x[k], path+"."+k); err != nil {
				return err
			}
		}
		return nil
	case []any:
		for i, e := range x {
			if err := checkWithValue(e, fmt.Sprintf("%s[%d]", path, i)); err != nil {
				return err
			}
		}
		return nil
	case map[any]any:
		return &withError{path, "has a key that is not a string"}
	}
	return &withError{path, fmt.Sprintf("holds a %T, which JSON cannot carry", v)}
}

// withText joins the templated strings of a with: value, so the submit
// check of what a template may read (.Input, ancestors' .Steps) covers
// them like a prompt.
func withText(v any) string {
	var b strings.Builder
	var walk func(v any)
	walk = func(v any) {
		switch x := v.(type) {
		case string:
			if strings.Contains(x, "{{") {
				b.WriteString(x)
				b.WriteString("\n")
			}
		case map[string]any:
			for _, k := range sortedKeys(x) {
				walk(x[k])
			}
		case []any:
			for _, e := range x {
				walk(e)
			}
		}
	}
	walk(v)
	return b.String()
}

func lineOr(line, fallback int) int {
	if line > 0 {
		return line
	}
	return fallback
}

// codeKind is a step that runs a function its worker registered (run:),
// with its arguments (with:).
type codeKind struct{}

func (codeKind) Name() string { return KindCode }

func (codeKind) Claims(st *Step) bool { return st.Run != "" }

func (codeKind) Takes(st *Step) ([]string, string) {
	return []string{"run", "with", "route", "timeout"}, "a code step (run: " + st.Run + ")"
}

func (codeKind) Check(_ *Spec, st *Step, where string, _ Limits, bad ProblemFunc) {
	checkCodeStep(st, where, bad)
}

func (codeKind) Prepare(*Step) error { return nil }

func (codeKind) Need(st *Step, _ Resolved) (string, string) { return "handler", st.Run }

func (codeKind) JSONOutput(*Step) bool { return true } // the function's value

func (codeKind) Input(ctx context.Context, st *Step, data TemplateData) (system, prompt string) {
	args, err := RenderWith(ctx, st, data)
	if err != nil {
		return "", "(cannot render: " + err.Error() + ")"
	}
	return "", "run " + st.Run + " with " + string(args)
}
