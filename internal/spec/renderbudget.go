package spec

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"text/template"
)

// What one render of a prompt template may cost. text/template takes no
// context, so a render that a step's timeout abandons would otherwise go on
// using a core: the render itself counts its work and stops.
//
//   - maxRenderIterations bounds range iterations (ranges over lists, maps
//     and integers alike).
//   - maxRenderOps bounds the work those iterations do: each iteration of a
//     range counts the operations of its body (template nodes, with field
//     lookups, function calls and printing weighted by what they cost; see
//     weight), so a long body does not multiply the iteration limit.
//   - maxFuncText bounds the text that print, printf, println, html, js and
//     urlquery make (a width such as %01000000d makes a megabyte).
//   - the rendered prompt itself is capped at maxRenderedBytes.
//
// A range is charged for all its items before its first iteration, so a
// render over its budget stops before it starts the range that would go
// over. Each limit stops a render in well under a second on one core (see
// BenchmarkRenderStopsAtItsBudget); ordinary prompts use a tiny part.
const (
	maxRenderIterations = 1_000_000
	maxRenderOps        = 5_000_000
	maxFuncText         = 16 << 20
	// maxRangeDepth bounds how deep ranges nest, judged at submit time:
	// loops multiply, and even a small input goes a long way 6 deep.
	maxRangeDepth = 3
)

// RenderBudgetError is a render stopped by one of the limits above. The
// step is dead-lettered as bad_request: the spec asks for too much work.
type RenderBudgetError struct {
	Template string // e.g. sql.prompt
	What     string // iterations, template operations, bytes of text from print functions
	Limit    int
}

func (e *RenderBudgetError) Error() string {
	return fmt.Sprintf("%s stopped: it would take more than %s %s, the limit per render", templateLabel(e.Template), thousands(e.Limit), e.What)
}

// ErrRenderBudget is wrapped by every RenderBudgetError.
var ErrRenderBudget = errors.New("template render over its budget")

// Unwrap makes errors.Is(err, ErrRenderBudget) hold.
func (e *RenderBudgetError) Unwrap() error { return ErrRenderBudget }

// templateLabel names a template for people: "template for step sql
// (prompt)" for the template sql.prompt.
func templateLabel(name string) string {
	if step, field, ok := strings.Cut(name, "."); ok {
		return "template for step " + step + " (" + field + ")"
	}
	return "template " + name
}

func thousands(n int) string {
	s := strconv.Itoa(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

// renderBudget is what one render has spent.
type renderBudget struct {
	ctx        context.Context
	name       string
	data       TemplateData
	perCompare int64 // see compareOps
	iterations int64
	ops        int64
	text       int64
	err        error // why the render was stopped
}

// stop records why the render stops and returns it for the template
// function to return (which ends the execution).
func (b *renderBudget) stop(err error) error {
	if b.err == nil {
		b.err = err
	}
	return b.err
}

func (b *renderBudget) over(what string, limit int) error {
	return b.stop(&RenderBudgetError{Template: b.name, What: what, Limit: limit})
}

// check stops the render once its context is done.
func (b *renderBudget) check() error {
	if b.err != nil {
		return b.err
	}
	if err := b.ctx.Err(); err != nil {
		return b.stop(fmt.Errorf("%s stopped: %w", templateLabel(b.name), err))
	}
	return nil
}

// spend charges n iterations of a body of weight operations.
func (b *renderBudget) spend(n, weight int64) error {
	if err := b.check(); err != nil {
		return err
	}
	n = min(n, maxRenderIterations+1) // no overflow below
	b.iterations += n
	b.ops += n * weight
	return b.within()
}

// within says which limit the render went over, if any.
func (b *renderBudget) within() error {
	switch {
	case b.iterations > maxRenderIterations:
		return b.over("iterations", maxRenderIterations)
	case b.ops > maxRenderOps:
		return b.over("template operations", maxRenderOps)
	}
	return nil
}

// chargeRange is the function every range's pipeline ends in (see
// boundTemplate): it charges the range's items at once and hands the value
// on untouched.
func (b *renderBudget) chargeRange(compared int, v reflect.Value, weight int) (reflect.Value, error) {
	n, sorted := rangeLen(v)
	w := int64(weight)
	if sorted {
		w += mapItemOps
	}
	if compared > 0 {
		w += int64(compared) * b.compareOps()
	}
	if err := b.spend(n, w); err != nil {
		return reflect.Value{}, err
	}
	return v, nil
}

// What a map item and a template call cost beyond their nodes, in
// operations: a range over a map sorts its keys first (about 400 ns an
// item against 15 for a list), and a call sets up a new state.
const (
	mapItemOps = 16
	callOps    = 40
)

// chargeCall starts every template of a template that calls templates
// (see boundTemplate): prompts cannot (the submit check refuses
// {{template}}), but if one ever ran, each call would count as an
// iteration, so recursion stops at the budget too.
func (b *renderBudget) chargeCall(compared int, weight int) (bool, error) {
	w := int64(weight) + callOps
	if compared > 0 {
		w += int64(compared) * b.compareOps()
	}
	return false, b.spend(1, w)
}

// funcs are the functions one render runs with: the two that the
// rewritten templates call, and the builtins that make text, counted.
func (b *renderBudget) funcs() template.FuncMap {
	return template.FuncMap{
		rangeFunc:    b.chargeRange,
		templateFunc: b.chargeCall,
		"print": func(args ...any) (string, error) {
			return b.produce(argsText(args, b.left())+int64(len(args)), func() string { return fmt.Sprint(args...) })
		},
		"println": func(args ...any) (string, error) {
			return b.produce(argsText(args, b.left())+int64(len(args))+1, func() string { return fmt.Sprintln(args...) })
		},
		"printf": func(format string, args ...any) (string, error) {
			return b.produce(printfText(format, args, b.left()), func() string { return fmt.Sprintf(format, args...) })
		},
		"html": func(args ...any) (string, error) {
			return b.produce(6*(argsText(args, b.left())+int64(len(args))), func() string { return template.HTMLEscaper(args...) })
		},
		"js": func(args ...any) (string, error) {
			return b.produce(6*(argsText(args, b.left())+int64(len(args))), func() string { return template.JSEscaper(args...) })
		},
		"urlquery": func(args ...any) (string, error) {
			return b.produce(3*(argsText(args, b.left())+int64(len(args))), func() string { return template.URLQueryEscaper(args...) })
		},
	}
}

// compareOps is what one data argument of eq and the others costs in this
// render: an operation per KiB of the longest string in its data (the
// string compared or hashed is one of them), at least one. The data is
// walked once per render, on the first range that compares.
func (b *renderBudget) compareOps() int64 {
	if b.perCompare == 0 {
		b.perCompare = 1 + longestString(reflect.ValueOf(b.data))>>10
	}
	return b.perCompare
}

// longestString is the length of the longest string in v, or in a struct
// (a StepView, which == compares whole) its strings together.
func longestString(v reflect.Value) int64 {
	switch v.Kind() {
	case reflect.String:
		return int64(v.Len())
	case reflect.Interface, reflect.Pointer:
		if v.IsNil() {
			return 0
		}
		return longestString(v.Elem())
	case reflect.Slice, reflect.Array:
		var n int64
		for i := range v.Len() {
			n = max(n, longestString(v.Index(i)))
		}
		return n
	case reflect.Map:
		var n int64
		for it := v.MapRange(); it.Next(); {
			n = max(n, longestString(it.Key()), longestString(it.Value()))
		}
		return n
	case reflect.Struct:
		var n, whole int64
		for i := range v.NumField() {
			f := v.Field(i)
			if f.Kind() == reflect.String {
				whole += int64(f.Len())
			}
			n = max(n, longestString(f))
		}
		return max(n, whole)
	}
	return 0
}

// rangeLen is how many iterations text/template's range makes over v, and
// whether it sorts them first (a map). Channels and iterator functions
// never occur in a prompt's data.
func rangeLen(v reflect.Value) (n int64, sorted bool) {
	for v.IsValid() && (v.Kind() == reflect.Pointer || v.Kind() == reflect.Interface) && !v.IsNil() {
		v = v.Elem()
	}
	switch v.Kind() {
	case reflect.Array, reflect.Slice:
		return int64(v.Len()), false
	case reflect.Map:
		return int64(v.Len()), true
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return max(v.Int(), 0), false
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return int64(min(v.Uint(), maxRenderIterations+1)), false
	}
	return 0, false
}

// The names of the functions boundTemplate inserts are keywords, so no
// template can call them itself, and an error at them reads naturally.
const (
	rangeFunc    = "range"
	templateFunc = "template"
)
