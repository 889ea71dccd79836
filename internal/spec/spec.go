// Package spec is a workflow's spec: its types, parsing (the YAML a
// person writes and the JSON stored with a workflow), validation, the
// templates and the views they read, and each step kind's spec side
// (Kind). The engine and the producer client both import it; it reads no
// Redis and calls no model.
package spec

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"gopkg.in/yaml.v3"

	"github.com/agentq/agentq/internal/defaults"
	"github.com/agentq/agentq/internal/problem"
	"github.com/agentq/agentq/retry"
)

// Spec is a workflow as a user writes it (docs/workflows.md).
type Spec struct {
	Name     string         `yaml:"name" json:"name"`
	Input    map[string]any `yaml:"input" json:"input,omitempty"`
	Defaults StepDefaults   `yaml:"defaults" json:"defaults"`
	// Deadline bounds the whole workflow, from its submit: 1s to
	// limits.max_wait (left out: none; 0s is refused). At it the workflow
	// ends timed_out, its unfinished steps canceled.
	Deadline Duration `yaml:"deadline,omitempty" json:"deadline,omitempty"`
	// Budget caps what the workflow's LLM calls may spend, all steps
	// together (nil: no cap of its own; budgets: in the configuration
	// still apply).
	Budget *BudgetSpec `yaml:"budget" json:"budget,omitempty"`
	Steps  []Step      `yaml:"steps" json:"steps"`
	Notify *NotifySpec `yaml:"notify" json:"notify,omitempty"` // a signed POST when the workflow ends (notifyspec.go)
	// Concurrency bounds each of its steps by a concurrency key shared
	// with other workflows (concurrency.go); a step's own replaces it.
	Concurrency *ConcurrencySpec `yaml:"concurrency" json:"concurrency,omitempty"`
	// Shards are the shard counts of the queues the workflow's steps go
	// to, stamped on the workflow's copy by the client that submits it
	// (from the configuration's queues:), never written by hand: its
	// tasks stay on the shards it began on whatever the configuration
	// says later. Missing: one shard.
	Shards map[string]int `yaml:"-" json:"shards,omitempty"`

	shape      string              // the stored spec's ShapeKey, once known (SetShape)
	index      map[string]int      // step id → position, once prepared
	dependents map[string][]string // step id → the steps that depend on it, once prepared
	topLines   map[string]int      // each top-level key's line, for problems that name one
}

// StepDefaults apply to every step that leaves the field out.
type StepDefaults struct {
	Route      string   `yaml:"route" json:"route,omitempty"`
	Timeout    Duration `yaml:"timeout" json:"timeout,omitempty"`
	MaxRetries *int     `yaml:"max_retries" json:"max_retries,omitempty"`
	Queue      string   `yaml:"queue" json:"queue,omitempty"`
}

// Step is one sub-task: a prompt (one LLM call, or a model–tool
// conversation) or code (run: a function the worker registered).
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
	// Stream sends the answer's text to the workflow's event log as it is
	// written (step.delta events); the step's output is the final answer.
	Stream bool `yaml:"stream" json:"stream,omitempty"`
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
	With any `yaml:"with" json:"with,omitempty"`
	// ForEach makes this a map step: a template yielding a JSON array
	// (e.g. "{{ .Steps.plan.JSON.items }}"); the step runs once per item,
	// which its templates read as .Item (and its position as .Index).
	ForEach string `yaml:"for_each" json:"for_each,omitempty"`
	// MaxItems bounds a map step's array (0: DefaultMaxItems); a longer
	// one dead-letters the step before any instance runs.
	MaxItems int `yaml:"max_items" json:"max_items,omitempty"`
	// MaxParallel bounds a map step's instances in flight at once (0:
	// DefaultMaxParallel).
	MaxParallel int `yaml:"max_parallel" json:"max_parallel,omitempty"`
	// Approve makes this an approval step: it waits for a person's
	// decision (approvespec.go).
	Approve *ApproveSpec `yaml:"approve" json:"approve,omitempty"`
	// WaitFor makes this a signal step: it waits for a signal sent to
	// its workflow from outside (signalspec.go).
	WaitFor *WaitForSpec `yaml:"wait_for" json:"wait_for,omitempty"`
	// Workflow makes this a child workflow step: it runs a stored spec as
	// a workflow of its own and waits for it (childspec.go).
	Workflow *ChildSpec `yaml:"workflow" json:"workflow,omitempty"`
	// Concurrency bounds this step by a concurrency key, instead of the
	// workflow's (concurrency.go).
	Concurrency *ConcurrencySpec `yaml:"concurrency" json:"concurrency,omitempty"`
	// Kinds holds the fields of the step kinds registered beyond the
	// built-in ones (registerKind), by key: a key no kind owns is an
	// unknown field.
	Kinds      map[string]any `yaml:",inline" json:"-"`
	messageT   *Template
	matchT     *Template
	withT      map[string]*withTemplate
	forEachT   *withTemplate
	itemInputs []string // what a map instance reads: the steps its own templates name
	line       int
	schema     *jsonschema.Schema // compiled Output.Schema
	inputs     []string           // direct dependencies and every step its templates read
	promptT    *Template
	systemT    *Template

	promptLine, systemLine, withLine int            // of the prompt, system and with fields, for template errors
	fieldLines                       map[string]int // every field's line, for problems that name one
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
// Limits are the limits a spec is checked against: the configuration's
// limits (config.Default fills them in). Each is taken as given: a parse
// with a limit that is not positive is refused, not given a default
// (DefaultLimits are the built-in ones, for a parse without a
// configuration).
type Limits struct {
	MaxSteps     int // steps in one spec (limits.max_steps)
	MaxSpecBytes int // one spec's size, schema files too (limits.max_spec_bytes)
	// SchemaDir is where output.schema paths are read from (the spec
	// file's directory); empty: a schema given as a path is an error, so a
	// spec that arrives over the network cannot read the server's files.
	SchemaDir string
	// MaxTurns caps a step's max_turns (limits.max_turns).
	MaxTurns int
	// MaxMapItems caps a map step's max_items (limits.max_map_items).
	MaxMapItems int
	// MaxWait caps every wait's timeout: wait_for, approval, the
	// workflow's deadline (limits.max_wait). 0: not checked here (a
	// caller without a configuration).
	MaxWait time.Duration
}

// DefaultLimits are the built-in limits (internal/defaults), for a parse
// without a configuration.
func DefaultLimits() Limits {
	return Limits{MaxSteps: defaults.MaxSteps, MaxSpecBytes: defaults.MaxSpecBytes, MaxTurns: defaults.MaxTurns, MaxMapItems: defaults.MaxMapItems,
		MaxWait: defaults.MaxWait}
}

// validate refuses a limit that is not positive: a caller that forgot
// one would otherwise refuse every spec, or accept any.
func (l Limits) validate() error {
	for _, f := range []struct {
		name string
		v    int
	}{{"max_steps", l.MaxSteps}, {"max_spec_bytes", l.MaxSpecBytes}, {"max_turns", l.MaxTurns}, {"max_map_items", l.MaxMapItems}} {
		if f.v <= 0 {
			return fmt.Errorf("spec: limits.%s is %d: every limit is positive (the configuration's limits, or DefaultLimits)", f.name, f.v)
		}
	}
	return nil
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
	unknownField = regexp.MustCompile(`^field (\S+) not found in type (\S+)$`)
)

// ParseSpec reads a spec (YAML or JSON) and checks its shape. routes, when
// not nil, is the set of known routes. Every problem is returned, joined.
func ParseSpec(source string, data []byte, routes map[string]bool, lim Limits) (*Spec, error) {
	if err := lim.validate(); err != nil {
		return nil, err
	}
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
	var unknown []error // a step's fields no kind owns: Step.Kinds keeps them from yaml's own check
	if len(root.Content) > 0 {
		unknown = unknownStepFields(source, root.Content[0])
		if loose := strictScalars(source, root.Content[0]); len(loose) > 0 {
			return nil, errors.Join(append(loose, unknown...)...)
		}
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	var s Spec
	if err := dec.Decode(&s); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, &SpecError{Source: source, Msg: "spec is empty"}
		}
		return nil, errors.Join(append([]error{yamlErr(source, err)}, unknown...)...)
	}
	if len(unknown) > 0 {
		return nil, errors.Join(unknown...)
	}
	// remember each step's line for later errors
	if len(root.Content) > 0 {
		s.topLines = keyLines(root.Content[0])
		for i, n := range stepNodes(root.Content[0]) {
			if i < len(s.Steps) {
				s.Steps[i].line = n.Line
				s.Steps[i].promptLine, s.Steps[i].systemLine = keyLine(n, "prompt"), keyLine(n, "system")
				s.Steps[i].withLine = keyLine(n, "with")
				s.Steps[i].fieldLines = keyLines(n)
				for _, block := range []string{"wait_for", "approve"} { // the keys a check needs to know were written
					for k, l := range keyLines(mappingNode(n, block)) {
						s.Steps[i].fieldLines[block+"."+k] = l
					}
				}
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
	if err := Prepare(&s); err != nil {
		return nil, &SpecError{Source: source, Msg: err.Error()}
	}
	return &s, nil
}

// Prepare computes what each step reads (its inputs) and parses its
// templates; specs loaded from the store are prepared once per worker by
// the spec cache. It returns the first template that does not parse.
func Prepare(s *Spec) error {
	s.indexGraph()
	if err := prepareKey(s.Concurrency); err != nil {
		return err
	}
	for i := range s.Steps {
		st := &s.Steps[i]
		var err error
		if err := prepareKey(st.Concurrency); err != nil {
			return err
		}
		if st.promptT, err = parseTemplate(st.ID+".prompt", st.Prompt); err != nil {
			return err
		}
		if st.systemT, err = parseTemplate(st.ID+".system", st.System); err != nil {
			return err
		}
		if st.withT, err = parseWith(st.With); err != nil {
			return fmt.Errorf("steps (%s).%w", st.ID, err)
		}
		if err := KindOf(st).Prepare(st); err != nil { // after with: a kind may hold other templates in withT
			return err
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
		templates := []*Template{st.promptT, st.systemT, st.matchT}
		for _, wt := range st.withT {
			templates = append(templates, wt.t)
		}
		for _, t := range templates {
			refs, _ := parsedRefs(t)
			for _, r := range refs {
				add(r.step)
			}
		}
		if err := st.prepareMap(); err != nil {
			return err
		}
		if m, ok := st.Output.schemaMap(); ok && st.schema == nil { // compiled by validate at submit
			if st.schema, err = CompileSchema(st.ID, m); err != nil {
				return fmt.Errorf("steps (%s).output.schema: %w", st.ID, err)
			}
		}
	}
	return nil
}

// SystemTemplate, PromptTemplate, MessageTemplate and ForEachTemplate
// are step st's parsed templates (prepare parsed them): its system text,
// its prompt, its approval message and its for_each.
func SystemTemplate(st *Step) *Template  { return st.systemT }
func PromptTemplate(st *Step) *Template  { return st.promptT }
func MessageTemplate(st *Step) *Template { return st.messageT }
func ForEachTemplate(st *Step) *Template {
	if st.forEachT == nil {
		return nil
	}
	return st.forEachT.t
}
