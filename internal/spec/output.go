package spec

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"gopkg.in/yaml.v3"

	"github.com/agentq/agentq/llmclient"
)

// OutputSpec is a step's output: field. Format "json" makes every answer
// go through a check (valid JSON, and matching Schema when set); an answer
// that fails is invalid_output.
type OutputSpec struct {
	// Format is text (the default) or json.
	Format string `yaml:"format" json:"format,omitempty"`
	// Schema is a JSON Schema, inline or (in a spec read from a file) the
	// path of a JSON or YAML file relative to the spec's directory. Stored
	// specs always hold it inline: workers never read files.
	Schema any `yaml:"schema" json:"schema,omitempty"`
}

// WantsJSON reports whether a step's answers must be JSON.
func WantsJSON(st *Step) bool {
	return KindOf(st).JSONOutput(st)
}

// schemaMap is the inline schema, if there is one.
func (o *OutputSpec) schemaMap() (map[string]any, bool) {
	if o == nil || o.Format != "json" {
		return nil, false
	}
	m, ok := o.Schema.(map[string]any)
	return m, ok
}

// checkOutput validates a step's output: field, reads a schema file into
// the spec and compiles the schema.
func (s *Spec) checkOutput(st *Step, where string, lim Limits, bad func(int, string, string, ...any)) {
	o := st.Output
	if o == nil {
		return
	}
	switch o.Format {
	case "", "text":
		if o.Schema != nil {
			bad(st.line, where+".output.schema", "needs format: json")
		}
		return
	case "json":
	default:
		bad(st.line, where+".output.format", "%q is not text or json", o.Format)
		return
	}
	switch v := o.Schema.(type) {
	case nil:
		return
	case string:
		m, err := loadSchema(lim.SchemaDir, v, lim.MaxSpecBytes)
		if err != nil {
			bad(st.line, where+".output.schema", "%v", err)
			return
		}
		o.Schema = m
	default:
		m, err := jsonValue(v)
		if err != nil {
			bad(st.line, where+".output.schema", "%v", err)
			return
		}
		o.Schema = m
	}
	sch, err := CompileSchema(st.ID, o.Schema.(map[string]any))
	if err != nil {
		bad(st.line, where+".output.schema", "does not compile: %v", err)
		return
	}
	st.schema = sch // prepare keeps it

}

// refuseLoader keeps schemas self-contained: a $ref to a file or URL is an
// error, never a read.
type refuseLoader struct{}

func (refuseLoader) Load(url string) (any, error) {
	return nil, fmt.Errorf("$ref to %s: schemas must be self-contained (no external references)", url)
}

// jsonValue converts a YAML- or JSON-decoded value into plain JSON types
// (as encoding/json would decode it), or says why it cannot.
func jsonValue(v any) (map[string]any, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, errors.New("is not a JSON-compatible value (mapping keys must be strings)")
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, errors.New("is not a JSON object")
	}
	return m, nil
}

// CompileSchema compiles a schema (plain JSON types) with the draft it
// names, 2020-12 when it names none.
func CompileSchema(name string, schema map[string]any) (*jsonschema.Schema, error) {
	b, err := json.Marshal(schema)
	if err != nil {
		return nil, err
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
	if err != nil {
		return nil, err
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.UseLoader(refuseLoader{})
	url := "agentq:///" + name + ".json"
	if err := c.AddResource(url, doc); err != nil {
		return nil, errors.New(OneLine(err.Error()))
	}
	s, err := c.Compile(url)
	if err != nil {
		return nil, errors.New(OneLine(err.Error()))
	}
	return s, nil
}

// loadSchema reads a schema file named by a spec: JSON or YAML, at most
// limit bytes, relative to dir.
func loadSchema(dir, path string, limit int) (map[string]any, error) {
	if dir == "" {
		return nil, fmt.Errorf("is a path (%q), but this spec was not read from a file: inline the schema", path)
	}
	full := path
	if !filepath.IsAbs(full) {
		full = filepath.Join(dir, path)
	}
	f, err := os.Open(full)
	if err != nil {
		return nil, fmt.Errorf("cannot read %s: %w", path, errors.Unwrap(err))
	}
	defer f.Close()
	var buf bytes.Buffer
	if _, err := buf.ReadFrom(io.LimitReader(f, int64(limit)+1)); err != nil {
		return nil, fmt.Errorf("cannot read %s: %w", path, err)
	}
	if buf.Len() > limit {
		return nil, fmt.Errorf("%s is over %d bytes", path, limit)
	}
	var v any
	if err := yaml.Unmarshal(buf.Bytes(), &v); err != nil {
		return nil, fmt.Errorf("%s is not JSON or YAML: %s", path, OneLine(err.Error()))
	}
	m, err := jsonValue(v)
	if err != nil {
		return nil, fmt.Errorf("%s %v", path, err)
	}
	return m, nil
}

// ParseJSONAnswer reads a step's JSON answer: the whole text must be one
// JSON document; surrounding white space and a single Markdown code fence
// (```json … ```) are allowed, prose is not. Numbers keep their precision
// (json.Number).
func ParseJSONAnswer(text string) (any, error) {
	t := strings.TrimSpace(text)
	if strings.HasPrefix(t, "```") && strings.HasSuffix(t, "```") && len(t) >= 6 {
		t = strings.TrimSpace(strings.TrimSuffix(t[3:], "```"))
		if i := strings.IndexByte(t, '\n'); i >= 0 && !strings.ContainsAny(t[:i], "{[\"") {
			t = t[i+1:] // the fence's language tag
		}
	}
	v, err := jsonschema.UnmarshalJSON(strings.NewReader(t))
	if err != nil {
		return nil, fmt.Errorf("not a JSON document: %v", err)
	}
	return v, nil
}

// checker is the Output check for a json step: the answer parses, and
// matches the schema when there is one.
func checker(schema *jsonschema.Schema) func(string) error {
	return func(text string) error {
		v, err := ParseJSONAnswer(text)
		if err != nil {
			return err
		}
		if schema != nil {
			if err := schema.Validate(v); err != nil {
				return fmt.Errorf("does not match the schema: %s", OneLine(ValidationText(err)))
			}
		}
		return nil
	}
}

// ValidationText drops the library's first line (which names the
// schema's internal URL) and keeps the reasons.
func ValidationText(err error) string {
	s := err.Error()
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[i+1:]
	}
	return strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(s), "- "))
}

// OutputRequest is the llmclient.Output for a json step.
func OutputRequest(st *Step) *llmclient.Output {
	if !WantsJSON(st) {
		return nil
	}
	o := &llmclient.Output{Name: st.ID, Check: checker(st.schema)}
	if m, ok := st.Output.Schema.(map[string]any); ok {
		o.Schema = m
	}
	return o
}

// OneLine joins a multi-line validation message into one line.
func OneLine(s string) string {
	return strings.Join(strings.Fields(strings.ReplaceAll(s, "\n- ", "; ")), " ")
}

// schemaRefuses says why a JSON answer valid under schema cannot have the
// field path a template reads (.Steps.X.JSON.a.b), or "" when it may (or
// the schema does not say: a composition, a reference, pattern
// properties, additional properties allowed, or not an object there). An
// object schema refuses a field its properties and required list lack
// when it lists either, unless it allows additional properties.
func schemaRefuses(schema map[string]any, path []string) string {
	node := schema
	for i, name := range path {
		for _, k := range []string{"$ref", "anyOf", "oneOf", "allOf", "patternProperties", "if"} {
			if _, ok := node[k]; ok {
				return "" // the schema's shape is not read here
			}
		}
		if t, ok := node["type"].(string); ok && t != "object" {
			if i == 0 {
				return ""
			}
			return fmt.Sprintf("%s is of type %s, which has no fields", strings.Join(path[:i], "."), t)
		}
		props, _ := node["properties"].(map[string]any)
		required, _ := node["required"].([]any)
		if sub, ok := props[name].(map[string]any); ok {
			node = sub
			continue
		}
		if _, ok := props[name]; ok {
			return "" // true or another form: anything goes
		}
		for _, r := range required {
			if r == name {
				return ""
			}
		}
		if ap, ok := node["additionalProperties"]; ok && ap != false {
			return "" // extra fields allowed
		}
		if props == nil && required == nil && node["additionalProperties"] != false {
			return "" // the schema lists no fields there
		}
		names := make([]string, 0, len(props))
		for n := range props {
			names = append(names, n)
		}
		sort.Strings(names)
		at := "its top level"
		if i > 0 {
			at = strings.Join(path[:i], ".")
		}
		return fmt.Sprintf("%s has no field %q (its fields: %s)", at, name, strings.Join(names, ", "))
	}
	return ""
}
