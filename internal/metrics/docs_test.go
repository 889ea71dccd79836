package metrics

import (
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

var (
	docMetric = regexp.MustCompile(`agentq_[a-z_]+[a-z](\{[^}]*\})?`)
	descName  = regexp.MustCompile(`fqName: "([^"]+)"`)
	descVars  = regexp.MustCompile(`variableLabels: \{([^}]*)\}`)
)

// Every metric docs/operations.md names is one the worker serves, with the
// labels it says: the page is read against the real registry.
func TestOperationsDocNamesRealMetrics(t *testing.T) {
	doc, err := os.ReadFile("../../docs/operations.md")
	if err != nil {
		t.Fatal(err)
	}
	m := New(nil, func() []TargetState { return nil })
	labels := map[string]map[string]bool{}
	descs := make(chan *prometheus.Desc, 256)
	go func() { m.reg.Describe(descs); close(descs) }()
	for d := range descs {
		s := d.String()
		name := descName.FindStringSubmatch(s)
		if name == nil {
			continue
		}
		set := map[string]bool{}
		if v := descVars.FindStringSubmatch(s); v != nil {
			for _, l := range strings.Split(v[1], ",") {
				if l = strings.TrimSpace(l); l != "" {
					set[l] = true
				}
			}
		}
		labels[name[1]] = set
	}
	seen := 0
	for _, ref := range docMetric.FindAllStringSubmatch(string(doc), -1) {
		name := strings.SplitN(ref[0], "{", 2)[0]
		name = strings.TrimSuffix(strings.TrimSuffix(strings.TrimSuffix(name, "_bucket"), "_count"), "_sum")
		if strings.HasPrefix(name, "agentq_test") {
			continue
		}
		have, ok := labels[name]
		if !ok {
			t.Errorf("docs/operations.md names %s, which the worker does not serve", ref[0])
			continue
		}
		seen++
		if ref[1] == "" {
			continue
		}
		for _, l := range strings.Split(strings.Trim(ref[1], "{}"), ",") {
			l = strings.TrimSpace(strings.SplitN(l, "=", 2)[0])
			if l != "" && !have[l] {
				t.Errorf("docs/operations.md: %s has no label %q (its labels: %v)", ref[0], l, keys(have))
			}
		}
	}
	if seen < 10 {
		t.Fatalf("found only %d metric names in docs/operations.md", seen)
	}
}

func keys(m map[string]bool) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}
