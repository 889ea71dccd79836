// Package problem formats input problems the way every agentq command
// reports them: one line each, "source:line: where: what".
package problem

import (
	"errors"
	"fmt"
	"strings"
)

// Format writes "source:line: where: msg", leaving out what is empty.
func Format(source string, line int, where, msg string) string {
	var b strings.Builder
	switch {
	case source != "" && line > 0:
		fmt.Fprintf(&b, "%s:%d: ", source, line)
	case source != "":
		b.WriteString(source + ": ")
	case line > 0:
		fmt.Fprintf(&b, "line %d: ", line)
	}
	if where != "" {
		b.WriteString(where + ": ")
	}
	b.WriteString(msg)
	return b.String()
}

// Split returns the errors joined in err (errors.Join), recursively, or err.
func Split(err error) []error {
	if err == nil {
		return nil
	}
	j, ok := err.(interface{ Unwrap() []error })
	if !ok {
		return []error{err}
	}
	var out []error
	for _, e := range j.Unwrap() {
		out = append(out, Split(e)...)
	}
	return out
}

// Lines returns one single-line message per joined error.
func Lines(err error) []string {
	var out []string
	for _, e := range Split(err) {
		out = append(out, strings.Join(strings.Fields(e.Error()), " "))
	}
	return out
}

// Join is errors.Join, flattening nested joins.
func Join(errs ...error) error {
	var flat []error
	for _, e := range errs {
		flat = append(flat, Split(e)...)
	}
	return errors.Join(flat...)
}
