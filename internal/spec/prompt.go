package spec

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
	"text/template"
)

// maxRenderedBytes bounds a rendered prompt.
const maxRenderedBytes = 4 << 20

// Template is a parsed prompt template, rewritten so that its
// renders count their work (boundTemplate). bounded says whether a render
// needs the budget's functions: a template without ranges and without
// functions that make text does work in proportion to its own size.
type Template struct {
	*template.Template
	bounded bool
}

// parseTemplate parses a prompt template (nil for an empty one).
func parseTemplate(name, text string) (*Template, error) {
	if text == "" {
		return nil, nil
	}
	t, err := template.New(name).Option("missingkey=zero").Parse(text)
	if err != nil {
		return nil, err
	}
	return &Template{Template: t, bounded: boundTemplate(t)}, nil
}

// RenderContext executes a parsed prompt template (nil renders as ""),
// checked at submit time to read only .Input and the step's ancestors. It
// stops once ctx is done (checked when a range starts and at each function
// that makes text) and at its budget (renderbudget.go) with a
// *RenderBudgetError.
func RenderContext(ctx context.Context, t *Template, input map[string]any, steps map[string]StepView) (string, error) {
	return RenderData(ctx, t, DataOf(input, steps, nil))
}

// RenderData is RenderContext over a dot already built.
func RenderData(ctx context.Context, t *Template, data TemplateData) (string, error) {
	if t == nil {
		return "", nil
	}
	b := &renderBudget{ctx: ctx, name: t.Name(), data: data}
	if err := b.check(); err != nil {
		return "", err
	}
	run := t.Template
	if t.bounded {
		// the budget's functions are bound to this render; the parsed
		// trees are shared, not copied
		var err error
		if run, err = t.Clone(); err != nil {
			return "", fmt.Errorf("template %s: %w", t.Name(), err)
		}
		run.Funcs(b.funcs())
	}
	var out limitedBuilder
	err := run.Execute(&out, data)
	if b.err != nil {
		return "", b.err
	}
	if err != nil {
		return "", fmt.Errorf("template %s: %w", t.Name(), err)
	}
	return out.String(), nil
}

// InputHash identifies what a step was asked: its checkpoint is valid only
// for the same rendered input.
func InputHash(route, system, prompt string) string {
	h := sha256.New()
	for _, s := range []string{route, system, prompt} {
		fmt.Fprintf(h, "%d:%s", len(s), s)
	}
	return hex.EncodeToString(h.Sum(nil))[:32]
}

type limitedBuilder struct{ strings.Builder }

func (b *limitedBuilder) Write(p []byte) (int, error) {
	if b.Len()+len(p) > maxRenderedBytes {
		return 0, fmt.Errorf("rendered prompt is over %d bytes", maxRenderedBytes)
	}
	return b.Builder.Write(p)
}
