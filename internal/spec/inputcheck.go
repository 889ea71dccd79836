package spec

import (
	"context"
	"errors"
	"fmt"
	"strings"
)

// What a submit checks once its input is final: the templates that read
// .Input alone are known then, and what they make is checked before
// anything runs instead of when a step starts (concurrency keys, signal
// matches, the lists of maps over the input).

// noValue is what text/template prints for a field its data lacks (or
// holds as null).
const noValue = "<no value>"

// CheckInput renders what s's templates over .Input alone make and
// refuses, each with a SpecError naming the step and field: a concurrency
// key that renders empty, too long, with a control character or with a
// field the input lacks (CheckKeys); a signal step's match that reads a
// field the input lacks; a map step's for_each over the input that yields
// no list, or more items than its max_items or lim.MaxMapItems.
func CheckInput(ctx context.Context, s *Spec, lim Limits) error {
	errs := []error{CheckKeys(ctx, s)}
	for i := range s.Steps {
		st := &s.Steps[i]
		where := fmt.Sprintf("steps[%d] (%s)", i, st.ID)
		errs = append(errs, checkMatchInput(ctx, s, st, where), checkMapInput(ctx, s, st, where, lim))
	}
	return errors.Join(errs...)
}

// checkInputOnly renders template t (text, when t was not prepared) over
// the input when it reads nothing but the input, and refuses a render
// that fails or that prints a field the input lacks.
func checkInputOnly(ctx context.Context, s *Spec, t *Template, name, text, where string) error {
	_, err := renderInputOnly(ctx, s, t, name, text, where)
	return err
}

// renderInputOnly is t over the input alone; ok is false when t reads
// more than the input (steps, an item): it is known only when it runs.
func renderInputOnly(ctx context.Context, s *Spec, t *Template, name, text, where string) (out string, err error) {
	if t == nil {
		if t, err = parseTemplate(name, text); err != nil || t == nil {
			return "", nil // a template that does not parse is the parse's problem
		}
	}
	if refs, err := parsedRefs(t); err != nil || len(refs) > 0 || readsItem(t) {
		return "", nil
	}
	out, err = RenderData(ctx, t, TemplateData{Input: s.Input})
	if err != nil {
		return "", &SpecError{Where: where, Msg: "cannot be rendered over the input: " + err.Error()}
	}
	if why := missingInput(t, s.Input, out); why != "" {
		return "", &SpecError{Where: where, Msg: why}
	}
	return out, nil
}

// missingInput says which fields of the input template t reads that the
// input lacks (or holds as null), when its render out shows one ("" when
// it does not).
func missingInput(t *Template, input map[string]any, out string) string {
	if !strings.Contains(out, noValue) {
		return ""
	}
	var missing []string
	for _, path := range inputPaths(t) {
		if !hasPath(input, path) {
			missing = appendNew(missing, ".Input."+strings.Join(path, "."))
		}
	}
	if len(missing) == 0 {
		return fmt.Sprintf("renders %q: it reads a value the input does not have", out)
	}
	return fmt.Sprintf("reads %s, which the input does not have (it would render %q)", strings.Join(missing, " and "), noValue)
}

// inputPaths are the .Input.<a>.<b>… fields template t reads (where dot
// is the top level).
func inputPaths(t *Template) [][]string {
	var out [][]string
	for _, tmpl := range t.Templates() {
		if tmpl.Tree != nil {
			walkTopFields(tmpl.Tree.Root, func(ident []string) {
				if len(ident) > 1 && ident[0] == "Input" {
					out = append(out, ident[1:])
				}
			}, nil)
		}
	}
	return out
}

// hasPath says whether input holds a value that is not null at path.
func hasPath(input map[string]any, path []string) bool {
	var v any = input
	for _, k := range path {
		m, ok := v.(map[string]any)
		if !ok {
			return true // not a mapping: the render's own error, not a missing field
		}
		if v, ok = m[k]; !ok || v == nil {
			return false
		}
	}
	return true
}

// clip is s cut to n bytes (on a rune's boundary), marked when cut.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n], "") + "…"
}
