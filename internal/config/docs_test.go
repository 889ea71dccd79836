package config

import (
	"os"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

// docs/configuration.md's defaults are the defaults: setting a field to
// what its row in the table of settings calls its default changes
// nothing, and the sections of the example file that show the defaults
// (resilience, retention, limits, and worker but its metrics address)
// read as Default().
func TestTheDocumentedDefaultsAreTheDefaults(t *testing.T) {
	doc, err := os.ReadFile("../../docs/configuration.md")
	if err != nil {
		t.Fatal(err)
	}
	none := func(string) (string, bool) { return "", false }
	base, err := Load(Input{LookupEnv: none})
	if err != nil {
		t.Fatal(err)
	}
	rows := regexp.MustCompile("(?m)^\\| `([a-z_.]+)` \\(default `?([^`)]+)`?\\) \\|").FindAllStringSubmatch(string(doc), -1)
	if len(rows) < 6 {
		t.Fatalf("found %d settings with a documented default: the table's shape changed", len(rows))
	}
	for _, r := range rows {
		field, value := r[1], r[2]
		if value == "off" {
			continue // the zero value, which a flag cannot be set to
		}
		got, err := Load(Input{LookupEnv: none, Flags: map[string]string{field: value}})
		if err != nil {
			t.Errorf("%s set to its documented default %q: %v", field, value, err)
			continue
		}
		if !reflect.DeepEqual(got, base) {
			t.Errorf("%s: the documented default %q is not the default", field, value)
		}
	}

	_, rest, ok := strings.Cut(string(doc), "## The file\n\n```yaml\n")
	block, _, ok2 := strings.Cut(rest, "\n```")
	if !ok || !ok2 {
		t.Fatal("docs/configuration.md has no example file under \"## The file\"")
	}
	var file map[string]any
	if err := yaml.Unmarshal([]byte(block), &file); err != nil {
		t.Fatal(err)
	}
	shown := map[string]any{}
	for _, k := range []string{"resilience", "worker", "retention", "limits"} {
		if file[k] == nil {
			t.Fatalf("the example file has no %s section", k)
		}
		shown[k] = file[k]
	}
	delete(shown["worker"].(map[string]any), "metrics_addr") // an example, off by default
	data, err := yaml.Marshal(shown)
	if err != nil {
		t.Fatal(err)
	}
	got, err := Load(Input{Path: "configuration.md", Data: data, LookupEnv: none})
	if err != nil {
		t.Fatal(err)
	}
	for name, pair := range map[string][2]any{
		"resilience": {got.Resilience, base.Resilience},
		"worker":     {got.Worker, base.Worker},
		"retention":  {got.Retention, base.Retention},
		"limits":     {got.Limits, base.Limits},
	} {
		if !reflect.DeepEqual(pair[0], pair[1]) {
			t.Errorf("the example file's %s is %+v, the default %+v", name, pair[0], pair[1])
		}
	}
}
