// Package tasks turns workflow specs into asynq tasks and runs them: spec
// parsing and validation, task types and payloads, the step handler, and
// the bookkeeping that makes fan-in steps run exactly once.
package tasks

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strings"
	"text/template/parse"
	"time"
	"unicode/utf8"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"gopkg.in/yaml.v3"

	"github.com/agentq/agentq/internal/problem"
	"github.com/agentq/agentq/retry"
)

// Spec is a workflow as a user writes it (docs/workflows.md).
type Spec struct {
	Name     string         `yaml:"name" json:"name"`
	Input    map[string]any `yaml:"input" json:"input,omitempty"`
	Defaults StepDefaults   `yaml:"defaults" json:"defaults"`
	Steps    []Step         `yaml:"steps" json:"steps"`
}

// StepDefaults apply to every step that leaves the field out.
type StepDefaults struct {
	Route      string   `yaml:"route" json:"route,omitempty"`
	Timeout    Duration `yaml:"timeout" json:"timeout,omitempty"`
	MaxRetries *int     `yaml:"max_retries" json:"max_retries,omitempty"`
	Queue      string   `yaml:"queue" json:"queue,omitempty"`
}

// Step is one sub-task: one LLM call.
type Step struct {
	ID        string   `yaml:"id" json:"id"`
	Route     string   `yaml:"route" json:"route,omitempty"`
	System    string   `yaml:"system" json:"system,omitempty"`
	Prompt    string   `yaml:"prompt" json:"prompt"`
	DependsOn []string `yaml:"depends_on" json:"depends_on,omitempty"`
	// Optional: the workflow goes on without this step if it is dead-lettered.
	Optional bool `yaml:"optional" json:"optional,omitempty"`
	// Degrade "template": when every target fails, answer with the route's
	// fallback_text, marked degraded. Empty: no degrading.
	Degrade    string   `yaml:"degrade" json:"degrade,omitempty"`
	Timeout    Duration `yaml:"timeout" json:"timeout,omitempty"`
	MaxRetries *int     `yaml:"max_retries" json:"max_retries,omitempty"`
	Queue      string   `yaml:"queue" json:"queue,omitempty"`
	MaxTokens  int      `yaml:"max_tokens" json:"max_tokens,omitempty"`
	// Temperature, when set, is sent to the model (0 to 2).
	Temperature *float64 `yaml:"temperature" json:"temperature,omitempty"`
	// Output asks for JSON (format: json) matching an optional schema.
	Output *OutputSpec `yaml:"output" json:"output,omitempty"`
	// Tools are offered to the model: a tool registered on the worker is
	// run and its result fed back (see ToolSpec); any other is passed
	// through, its calls kept with the step's output.
	Tools []ToolSpec `yaml:"tools" json:"tools,omitempty"`
	// MaxTurns bounds the model calls of a step that runs tools (0:
	// DefaultMaxTurns, or Limits.MaxTurns when that is lower).
	MaxTurns int `yaml:"max_turns" json:"max_turns,omitempty"`
	// Run makes this a code step: the worker runs the function registered
	// under this name (instead of sending a prompt), with With as its
	// arguments.
	Run string `yaml:"run" json:"run,omitempty"`
	// With is a code step's arguments: any value; strings in it may be
	// templates over .Input and .Steps, and a string that is exactly one
	// template action keeps the JSON value it yields.
	With    any `yaml:"with" json:"with,omitempty"`
	withT   map[string]*withTemplate
	line    int
	schema  *jsonschema.Schema // compiled Output.Schema
	inputs  []string           // direct dependencies and every step its templates read
	promptT *promptTemplate
	systemT *promptTemplate

	promptLine, systemLine, withLine int // of the prompt, system and with fields, for template errors
}

// Duration is a step timeout such as "60s".
type Duration time.Duration

// UnmarshalYAML reads a Go duration string.
func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	v, err := time.ParseDuration(n.Value)
	if err != nil {
		return fmt.Errorf("line %d: bad duration %q (want e.g. 30s, 2m)", n.Line, n.Value)
	}
	*d = Duration(v)
	return nil
}

// MarshalYAML writes the duration as a string.
func (d Duration) MarshalYAML() (any, error) { return time.Duration(d).String(), nil }

// MarshalJSON writes the duration as a string.
func (d Duration) MarshalJSON() ([]byte, error) {
	return []byte(`"` + time.Duration(d).String() + `"`), nil
}

// UnmarshalJSON reads the duration string MarshalJSON writes.
func (d *Duration) UnmarshalJSON(b []byte) error {
	v, err := time.ParseDuration(strings.Trim(string(b), `"`))
	*d = Duration(v)
	return err
}

// Limits bound a spec. The zero value means the defaults below.
type Limits struct {
	MaxSteps     int // default 100
	MaxSpecBytes int // default 1 MiB; schema files too
	// SchemaDir is where output.schema paths are read from (the spec
	// file's directory); empty: a schema given as a path is an error, so a
	// spec that arrives over the network cannot read the server's files.
	SchemaDir string
	// MaxTurns caps a step's max_turns; default 20 (the configuration's
	// limits.max_turns).
	MaxTurns int
}

func (l Limits) withDefaults() Limits {
	if l.MaxSteps <= 0 {
		l.MaxSteps = 100
	}
	if l.MaxSpecBytes <= 0 {
		l.MaxSpecBytes = 1 << 20
	}
	if l.MaxTurns <= 0 {
		l.MaxTurns = DefaultMaxTurnsLimit
	}
	return l
}

// Defaults for steps whose spec leaves them out and whose workflow has no
// defaults either.
const (
	DefaultTimeout    = 60 * time.Second
	DefaultMaxRetries = retry.DefaultMaxRetries
	DefaultQueue      = "default"
)

// SpecError is one problem with a spec, naming where it is.
type SpecError struct {
	Source string // file name, when known
	Line   int
	Where  string // e.g. steps[2] (clean).depends_on
	Msg    string
}

func (e *SpecError) Error() string { return problem.Format(e.Source, e.Line, e.Where, e.Msg) }

// ErrInvalidSpec is wrapped by every spec problem.
var ErrInvalidSpec = errors.New("invalid workflow spec")

func (e *SpecError) Unwrap() error { return ErrInvalidSpec }

var (
	idPattern    = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_-]{0,62}$`)
	lineMsg      = regexp.MustCompile(`^(?:yaml: )?line (\d+): (.*)$`)
	unknownField = regexp.MustCompile(`^field (\S+) not found in type \S+$`)
)

// ParseSpec reads a spec (YAML or JSON) and checks its shape. routes, when
// not nil, is the set of known routes. Every problem is returned, joined.
func ParseSpec(source string, data []byte, routes map[string]bool, lim Limits) (*Spec, error) {
	lim = lim.withDefaults()
	if len(data) > lim.MaxSpecBytes {
		return nil, &SpecError{Source: source, Msg: fmt.Sprintf("spec is %d bytes, over the limit of %d", len(data), lim.MaxSpecBytes)}
	}
	if !utf8.Valid(data) {
		return nil, &SpecError{Source: source, Msg: "spec is not valid UTF-8"}
	}
	var root yaml.Node
	if err := yaml.Unmarshal(data, &root); err != nil {
		return nil, yamlErr(source, err)
	}
	if err := checkDepth(&root, 0); err != nil {
		return nil, &SpecError{Source: source, Line: err.Line, Msg: "spec nests deeper than 32 levels"}
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	var s Spec
	if err := dec.Decode(&s); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, &SpecError{Source: source, Msg: "spec is empty"}
		}
		return nil, yamlErr(source, err)
	}
	// remember each step's line for later errors
	if len(root.Content) > 0 {
		for i, n := range stepNodes(root.Content[0]) {
			if i < len(s.Steps) {
				s.Steps[i].line = n.Line
				s.Steps[i].promptLine, s.Steps[i].systemLine = keyLine(n, "prompt"), keyLine(n, "system")
				s.Steps[i].withLine = keyLine(n, "with")
			}
		}
	}
	if err := s.validate(routes, lim); err != nil {
		var out []error
		for _, e := range problem.Split(err) {
			var se *SpecError
			if errors.As(e, &se) {
				se.Source = source
			}
			out = append(out, e)
		}
		return nil, errors.Join(out...)
	}
	if err := s.prepare(); err != nil {
		return nil, &SpecError{Source: source, Msg: err.Error()}
	}
	return &s, nil
}

type depthError struct{ Line int }

func (e *depthError) Error() string { return "too deep" }

func checkDepth(n *yaml.Node, d int) *depthError {
	if d > 32 {
		return &depthError{Line: n.Line}
	}
	for _, c := range n.Content {
		if err := checkDepth(c, d+1); err != nil {
			return err
		}
	}
	return nil
}

func stepNodes(doc *yaml.Node) []*yaml.Node {
	if doc.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(doc.Content); i += 2 {
		if doc.Content[i].Value == "steps" && doc.Content[i+1].Kind == yaml.SequenceNode {
			return doc.Content[i+1].Content
		}
	}
	return nil
}

// keyLine is the line of key in a mapping node (0 if absent).
func keyLine(n *yaml.Node, key string) int {
	if n.Kind != yaml.MappingNode {
		return 0
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == key {
			return n.Content[i].Line
		}
	}
	return 0
}

func yamlErr(source string, err error) error {
	var te *yaml.TypeError
	msgs := []string{err.Error()}
	if errors.As(err, &te) {
		msgs = te.Errors
	}
	var out []error
	for _, m := range msgs {
		se := &SpecError{Source: source, Msg: strings.TrimPrefix(m, "yaml: ")}
		if p := lineMsg.FindStringSubmatch(m); p != nil {
			fmt.Sscan(p[1], &se.Line)
			se.Msg = p[2]
		}
		if u := unknownField.FindStringSubmatch(se.Msg); u != nil {
			se.Msg = fmt.Sprintf("unknown field %q", u[1])
		}
		out = append(out, se)
	}
	return errors.Join(out...)
}

func (s *Spec) validate(routes map[string]bool, lim Limits) error {
	var errs []error
	bad := func(line int, where, format string, a ...any) {
		errs = append(errs, &SpecError{Line: line, Where: where, Msg: fmt.Sprintf(format, a...)})
	}
	if strings.TrimSpace(s.Name) == "" {
		bad(0, "name", "is empty")
	}
	if len(s.Steps) == 0 {
		bad(0, "steps", "is empty")
	}
	if len(s.Steps) > lim.MaxSteps {
		bad(0, "steps", "has %d steps, over the limit of %d", len(s.Steps), lim.MaxSteps)
		return errors.Join(errs...)
	}
	checkCommon := func(line int, where string, route string, timeout Duration, retries *int, queue string) {
		if route != "" && routes != nil && !routes[route] {
			bad(line, where+".route", "unknown route %q", route)
		}
		if timeout != 0 {
			d := time.Duration(timeout)
			switch {
			case d < time.Second:
				bad(line, where+".timeout", "%s is under 1s (asynq counts whole seconds)", d)
			case d%time.Second != 0:
				bad(line, where+".timeout", "%s is not whole seconds (asynq counts whole seconds)", d)
			}
		}
		if retries != nil && (*retries < 0 || *retries > 100) {
			bad(line, where+".max_retries", "%d is not between 0 and 100", *retries)
		}
		if queue != "" && !idPattern.MatchString(queue) {
			bad(line, where+".queue", "%q is not a valid queue name", queue)
		}
	}
	checkCommon(0, "defaults", s.Defaults.Route, s.Defaults.Timeout, s.Defaults.MaxRetries, s.Defaults.Queue)
	index := map[string]int{}
	for i, st := range s.Steps {
		where := fmt.Sprintf("steps[%d]", i)
		if st.ID != "" {
			where += " (" + st.ID + ")"
		}
		switch {
		case !idPattern.MatchString(st.ID):
			bad(st.line, where+".id", "%q is not a step id (a letter, then letters, digits, _ or -, at most 63)", st.ID)
		case index[st.ID] > 0:
			bad(st.line, where+".id", "%q is used by steps[%d] too", st.ID, index[st.ID]-1)
		default:
			index[st.ID] = i + 1
		}
		if st.Run != "" {
			checkCodeStep(&s.Steps[i], where, bad)
		} else {
			if st.Route == "" && s.Defaults.Route == "" {
				bad(st.line, where+".route", "is empty and defaults.route is not set")
			}
			if strings.TrimSpace(st.Prompt) == "" {
				bad(st.line, where+".prompt", "is empty (a step has a prompt, or run: a function)")
			}
			if st.With != nil {
				bad(lineOr(st.withLine, st.line), where+".with", "is only for code steps (run:)")
			}
		}
		if st.Degrade != "" && st.Degrade != "template" {
			bad(st.line, where+".degrade", "%q is not template", st.Degrade)
		}
		if st.MaxTokens < 0 {
			bad(st.line, where+".max_tokens", "is negative")
		}
		if t := st.Temperature; t != nil && (*t < 0 || *t > 2) {
			bad(st.line, where+".temperature", "%v is not between 0 and 2", *t)
		}
		s.checkOutput(&s.Steps[i], where, lim, bad)
		s.checkTools(&s.Steps[i], where, lim, bad)
		checkCommon(st.line, where, st.Route, st.Timeout, st.MaxRetries, st.Queue)
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	for i, st := range s.Steps {
		where := fmt.Sprintf("steps[%d] (%s)", i, st.ID)
		seen := map[string]bool{}
		for _, d := range st.DependsOn {
			switch {
			case d == st.ID:
				bad(st.line, where+".depends_on", "step depends on itself")
			case index[d] == 0:
				bad(st.line, where+".depends_on", "unknown step %q", d)
			case seen[d]:
				bad(st.line, where+".depends_on", "%q is listed twice", d)
			}
			seen[d] = true
		}
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	if cycle := s.findCycle(); cycle != nil {
		bad(0, "steps", "dependency cycle: %s", strings.Join(cycle, " → "))
		return errors.Join(errs...)
	}
	for i, st := range s.Steps {
		where := fmt.Sprintf("steps[%d] (%s)", i, st.ID)
		for _, f := range []struct {
			name, text string
			line       int
		}{{"prompt", st.Prompt, st.promptLine}, {"system", st.System, st.systemLine}, {"with", withText(st.With), st.withLine}} {
			if f.text == "" {
				continue
			}
			line := f.line
			if line == 0 {
				line = st.line
			}
			refs, err := templateRefs(st.ID+"."+f.name, f.text)
			if err != nil {
				bad(line, where+"."+f.name, "%v", err)
				continue
			}
			anc := s.ancestors(st.ID)
			for _, r := range refs {
				if !anc[r.step] {
					bad(line, where+"."+f.name, "refers to .Steps.%s, which is not a step it depends on (directly or not)", r.step)
				} else if dep, _ := s.Step(r.step); r.field == "JSON" && !dep.wantsJSON() {
					bad(line, where+"."+f.name, "reads .Steps.%s.JSON, but step %s has no output.format json", r.step, r.step)
				}
			}
		}
	}
	return errors.Join(errs...)
}

// prepare computes what each step reads (its inputs) and parses its
// templates; specs loaded from the store are prepared once per worker by
// the spec cache. It returns the first template that does not parse.
func (s *Spec) prepare() error {
	for i := range s.Steps {
		st := &s.Steps[i]
		var err error
		if st.promptT, err = parseTemplate(st.ID+".prompt", st.Prompt); err != nil {
			return err
		}
		if st.systemT, err = parseTemplate(st.ID+".system", st.System); err != nil {
			return err
		}
		if st.withT, err = parseWith(st.With); err != nil {
			return fmt.Errorf("steps (%s).%w", st.ID, err)
		}
		seen := map[string]bool{}
		st.inputs = nil
		add := func(id string) {
			if !seen[id] {
				seen[id] = true
				st.inputs = append(st.inputs, id)
			}
		}
		for _, d := range st.DependsOn {
			add(d)
		}
		templates := []*promptTemplate{st.promptT, st.systemT}
		for _, wt := range st.withT {
			templates = append(templates, wt.t)
		}
		for _, t := range templates {
			refs, _ := parsedRefs(t)
			for _, r := range refs {
				add(r.step)
			}
		}
		if m, ok := st.Output.schemaMap(); ok && st.schema == nil { // compiled by validate at submit
			if st.schema, err = compileSchema(st.ID, m); err != nil {
				return fmt.Errorf("steps (%s).output.schema: %w", st.ID, err)
			}
		}
	}
	return nil
}

// Step returns the step with the given id.
func (s *Spec) Step(id string) (*Step, bool) {
	for i := range s.Steps {
		if s.Steps[i].ID == id {
			return &s.Steps[i], true
		}
	}
	return nil, false
}

// Dependents lists the steps that depend on id directly.
func (s *Spec) Dependents(id string) []string {
	var out []string
	for _, st := range s.Steps {
		for _, d := range st.DependsOn {
			if d == id {
				out = append(out, st.ID)
			}
		}
	}
	return out
}

// Roots lists the steps with no dependencies.
func (s *Spec) Roots() []string {
	var out []string
	for _, st := range s.Steps {
		if len(st.DependsOn) == 0 {
			out = append(out, st.ID)
		}
	}
	return out
}

func (s *Spec) ancestors(id string) map[string]bool {
	out := map[string]bool{}
	var walk func(string)
	walk = func(x string) {
		st, _ := s.Step(x)
		for _, d := range st.DependsOn {
			if !out[d] {
				out[d] = true
				walk(d)
			}
		}
	}
	walk(id)
	return out
}

// findCycle returns the steps of one dependency cycle, or nil.
func (s *Spec) findCycle() []string {
	const (
		white = iota
		grey
		black
	)
	color := map[string]int{}
	var stack []string
	var cycle []string
	var visit func(string) bool
	visit = func(id string) bool {
		color[id] = grey
		stack = append(stack, id)
		st, _ := s.Step(id)
		for _, d := range st.DependsOn {
			switch color[d] {
			case grey:
				for i, x := range stack {
					if x == d {
						cycle = append(append([]string{}, stack[i:]...), d)
					}
				}
				return true
			case white:
				if visit(d) {
					return true
				}
			}
		}
		stack = stack[:len(stack)-1]
		color[id] = black
		return false
	}
	for _, st := range s.Steps {
		if color[st.ID] == white && visit(st.ID) {
			return cycle
		}
	}
	return nil
}

// stepRef is one .Steps.<step>[.<field>] a template reads.
type stepRef struct{ step, field string }

// stepFields are the fields of a StepView.
var stepFields = map[string]bool{"Output": true, "JSON": true, "Degraded": true, "Missing": true}

// templateRefs parses a prompt template and returns the steps it reads
// through .Steps.<id>. Only .Input and .Steps are allowed at the top level,
// and ranges may nest at most maxRangeDepth deep.
func templateRefs(name, text string) ([]stepRef, error) {
	t, err := parseTemplate(name, text)
	if err != nil {
		return nil, fmt.Errorf("template: %s", strings.TrimPrefix(err.Error(), "template: "))
	}
	if t == nil {
		return nil, nil
	}
	if err := checkRangeDepth(t.Template); err != nil {
		return nil, err
	}
	return parsedRefs(t)
}

// parsedRefs walks a parsed template (nil has none) for .Steps.<id>.
func parsedRefs(t *promptTemplate) ([]stepRef, error) {
	if t == nil {
		return nil, nil
	}
	var refs []stepRef
	var problem error
	var walk func(parse.Node)
	walk = func(n parse.Node) {
		if n == nil || problem != nil {
			return
		}
		switch n := n.(type) {
		case *parse.ListNode:
			if n != nil {
				for _, c := range n.Nodes {
					walk(c)
				}
			}
		case *parse.ActionNode:
			walk(n.Pipe)
		case *parse.PipeNode:
			if n != nil {
				for _, c := range n.Cmds {
					walk(c)
				}
			}
		case *parse.CommandNode:
			for _, a := range n.Args {
				walk(a)
			}
		case *parse.IfNode:
			walk(n.Pipe)
			walk(n.List)
			walk(n.ElseList)
		case *parse.RangeNode:
			walk(n.Pipe)
			walk(n.List)
			walk(n.ElseList)
		case *parse.WithNode:
			walk(n.Pipe)
			walk(n.List)
			walk(n.ElseList)
		case *parse.FieldNode:
			switch {
			case len(n.Ident) >= 1 && n.Ident[0] == "Input":
			case len(n.Ident) >= 2 && n.Ident[0] == "Steps":
				r := stepRef{step: n.Ident[1]}
				if len(n.Ident) >= 3 {
					r.field = n.Ident[2]
					if !stepFields[r.field] {
						problem = fmt.Errorf("template: .Steps.%s.%s is not available (a step has .Output, .JSON, .Degraded and .Missing)", r.step, r.field)
					}
				}
				refs = append(refs, r)
			default:
				problem = fmt.Errorf("template: .%s is not available (use .Input.<key>, .Steps.<id>.Output or .Steps.<id>.JSON.<field>)", strings.Join(n.Ident, "."))
			}
		case *parse.TemplateNode:
			problem = fmt.Errorf("template: {{template}} is not allowed")
		}
	}
	walk(t.Root)
	return refs, problem
}
