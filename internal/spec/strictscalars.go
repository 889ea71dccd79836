package spec

import (
	"reflect"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"
)

// The YAML decoder takes "yes", "on" and "y" for true and truncates 1.5
// to 1: a spec's booleans and whole numbers are taken only as YAML's own
// (true, false; 3), anything else refused naming the field, before the
// spec is decoded.

var unmarshalerType = reflect.TypeFor[yaml.Unmarshaler]()

// strictScalars reports every boolean or number field of the spec whose
// value is not of its type, at most maxProblems.
func strictScalars(source string, doc *yaml.Node) []error {
	var out []error
	seen := map[*yaml.Node]bool{}
	var walk func(n *yaml.Node, t reflect.Type, where string, depth int)
	walk = func(n *yaml.Node, t reflect.Type, where string, depth int) {
		if n == nil || depth > 32 || len(out) >= maxProblems {
			return
		}
		if n.Kind == yaml.AliasNode {
			walk(n.Alias, t, where, depth+1)
			return
		}
		for t.Kind() == reflect.Pointer {
			t = t.Elem()
		}
		if reflect.PointerTo(t).Implements(unmarshalerType) {
			return // a type that reads its own YAML (durations, tools, notify)
		}
		switch t.Kind() {
		case reflect.Struct:
			if n.Kind != yaml.MappingNode || seen[n] {
				return // not a mapping: the decoder says so; a mapping aliased twice: read once
			}
			seen[n] = true
			for i := 0; i+1 < len(n.Content); i += 2 {
				k, v := n.Content[i], n.Content[i+1]
				if k.Value == "<<" && k.ShortTag() == "!!merge" {
					if v.Kind == yaml.SequenceNode {
						for _, m := range v.Content {
							walk(m, t, where, depth+1)
						}
					} else {
						walk(v, t, where, depth+1)
					}
					continue
				}
				if f, ok := yamlField(t, k.Value); ok {
					walk(v, f.Type, joinWhere(where, k.Value), depth+1)
				}
			}
		case reflect.Slice:
			if n.Kind != yaml.SequenceNode {
				return
			}
			for i, c := range n.Content {
				w := where + "[" + strconv.Itoa(i) + "]"
				if where == "steps" {
					if id := mappingValue(c, "id"); id != "" {
						w += " (" + id + ")"
					}
				}
				walk(c, t.Elem(), w, depth+1)
			}
		case reflect.Map:
			if n.Kind != yaml.MappingNode {
				return
			}
			for i := 0; i+1 < len(n.Content); i += 2 {
				walk(n.Content[i+1], t.Elem(), joinWhere(where, n.Content[i].Value), depth+1)
			}
		case reflect.Bool:
			if tag := n.ShortTag(); n.Kind == yaml.ScalarNode && tag != "!!bool" && tag != "!!null" {
				out = append(out, &SpecError{Source: source, Line: n.Line, Where: where, Msg: scalarShown(n) + " is " + tagName(tag) + ", not a boolean (true or false)"})
			}
		case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
			reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
			if tag := n.ShortTag(); n.Kind == yaml.ScalarNode && tag != "!!int" && tag != "!!null" {
				out = append(out, &SpecError{Source: source, Line: n.Line, Where: where, Msg: scalarShown(n) + " is " + tagName(tag) + ", not a whole number"})
			}
		case reflect.Float32, reflect.Float64:
			if tag := n.ShortTag(); n.Kind == yaml.ScalarNode && tag != "!!int" && tag != "!!float" && tag != "!!null" {
				out = append(out, &SpecError{Source: source, Line: n.Line, Where: where, Msg: scalarShown(n) + " is " + tagName(tag) + ", not a number"})
			}
		}
	}
	walk(doc, reflect.TypeFor[Spec](), "", 0)
	return out
}

// yamlField is struct type t's field whose YAML key is key (not an
// inline one: a registered kind's fields are its own to read).
func yamlField(t reflect.Type, key string) (reflect.StructField, bool) {
	for i := range t.NumField() {
		f := t.Field(i)
		if name, _, _ := strings.Cut(f.Tag.Get("yaml"), ","); name == key && name != "" && name != "-" {
			return f, true
		}
	}
	return reflect.StructField{}, false
}

// mappingValue is the scalar value of key in mapping n ("" if none).
func mappingValue(n *yaml.Node, key string) string {
	if n.Kind != yaml.MappingNode {
		return ""
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == key && n.Content[i+1].Kind == yaml.ScalarNode {
			return n.Content[i+1].Value
		}
	}
	return ""
}

func joinWhere(where, key string) string {
	if where == "" {
		return key
	}
	return where + "." + key
}

// scalarShown is a scalar as a problem shows it: a string quoted.
func scalarShown(n *yaml.Node) string {
	v := n.Value
	if len(v) > 40 {
		v = strings.ToValidUTF8(v[:40], "") + "…"
	}
	if n.ShortTag() == "!!str" {
		return strconv.Quote(v)
	}
	return v
}

// tagName says what a YAML tag is, for a problem.
func tagName(tag string) string {
	switch tag {
	case "!!str":
		return "a string"
	case "!!int":
		return "a whole number"
	case "!!float":
		return "a floating-point number"
	case "!!bool":
		return "a boolean"
	case "!!timestamp":
		return "a date"
	}
	return "a " + strings.TrimPrefix(tag, "!!")
}
