package spec

import (
	"context"
	"strings"
)

// promptKind is a step that asks its route (prompt:, system:): one model
// call per attempt. A prompt step that offers tools is toolLoopKind.
type promptKind struct{}

func (promptKind) Name() string { return KindPrompt }

func (promptKind) Claims(*Step) bool { return true }

func (promptKind) Check(s *Spec, st *Step, where string, _ Limits, bad ProblemFunc) {
	checkPrompt(s, st, where, bad)
}

// promptFields are the fields every prompt step takes.
var promptFields = []string{"route", "system", "prompt", "degrade", "max_tokens", "temperature", "output", "timeout", "stream"}

func (promptKind) Takes(*Step) ([]string, string) { return promptFields, "a prompt step without tools" }

// checkPrompt checks the fields every prompt step has.
func checkPrompt(s *Spec, st *Step, where string, bad ProblemFunc) {
	if st.Route == "" && s.Defaults.Route == "" {
		bad(st.line, where+".route", "is empty and defaults.route is not set")
	}
	if strings.TrimSpace(st.Prompt) == "" {
		bad(st.line, where+".prompt", "is empty (a step has a prompt, or run: a function)")
	}
	if st.Degrade != "" && st.Degrade != "template" {
		bad(lineOr(st.fieldLines["degrade"], st.line), where+".degrade", "%q is not a way to degrade (template: the route's fallback text, marked degraded)", st.Degrade)
	}
	if st.MaxTokens < 0 {
		bad(lineOr(st.fieldLines["max_tokens"], st.line), where+".max_tokens", "is negative")
	}
	if t := st.Temperature; t != nil && (*t < 0 || *t > 2) {
		bad(lineOr(st.fieldLines["temperature"], st.line), where+".temperature", "%v is not between 0 and 2", *t)
	}
	if st.Stream && st.Output != nil {
		bad(lineOr(st.fieldLines["stream"], st.line), where+".stream", "a streamed answer is text: it cannot be checked against output: (drop one)")
	}
}

func (promptKind) Prepare(*Step) error { return nil }

func (promptKind) Need(_ *Step, r Resolved) (string, string) { return "route", r.Route }

func (promptKind) JSONOutput(st *Step) bool { return st.Output != nil && st.Output.Format == "json" }

func (promptKind) Input(ctx context.Context, st *Step, data TemplateData) (system, prompt string) {
	var err error
	if system, err = RenderData(ctx, st.systemT, data); err != nil {
		system = "(cannot render: " + err.Error() + ")"
	}
	if prompt, err = RenderData(ctx, st.promptT, data); err != nil {
		prompt = "(cannot render: " + err.Error() + ")"
	}
	return system, prompt
}
