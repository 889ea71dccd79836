package schedule

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/agentq/agentq/internal/config"
	"github.com/agentq/agentq/internal/problem"
	"github.com/agentq/agentq/internal/producer"
	"github.com/agentq/agentq/internal/spec"
)

// FromConfig reads the configuration's schedules: each cron expression,
// and each spec file, parsed and checked as enqueue checks a spec (routes
// and limits from o), with the schedule's input set. A problem is one
// *config.FieldError naming the schedule and its field.
func FromConfig(cfg config.Config, o producer.ClientOptions) ([]Entry, error) {
	var routes map[string]bool
	if o.Routes != nil {
		routes = map[string]bool{}
		for _, r := range o.Routes {
			routes[r] = true
		}
	}
	out := make([]Entry, 0, len(cfg.Schedules))
	for _, sc := range cfg.Schedules {
		bad := func(field, format string, a ...any) error {
			return &config.FieldError{Source: cfg.File, Field: "schedules." + sc.Name + "." + field, Msg: fmt.Sprintf(format, a...)}
		}
		when, err := config.ParseCron(sc.Cron)
		if err != nil {
			return nil, bad("cron", "%q is not a cron expression: %v", sc.Cron, err)
		}
		path := cfg.SpecPath(sc)
		data, err := os.ReadFile(path)
		if err != nil {
			return nil, bad("spec", "cannot read %s: %v", path, err)
		}
		lim := o.Limits
		lim.SchemaDir = filepath.Dir(path)
		wspec, err := spec.ParseSpec(path, data, routes, lim)
		if err != nil {
			return nil, bad("spec", "%s is not a valid spec: %s", path, strings.Join(problem.Lines(err), "; "))
		}
		if len(sc.Input) > 0 {
			read, all := wspec.InputKeys()
			if wspec.Input == nil {
				wspec.Input = map[string]any{}
			}
			for k, v := range sc.Input {
				if !all && !slices.Contains(read, k) {
					return nil, bad("input."+k, "no template of %s reads .Input.%s", path, k)
				}
				wspec.Input[k] = v
			}
		}
		out = append(out, Entry{Name: sc.Name, Cron: sc.Cron, When: when, Spec: wspec})
	}
	return out, nil
}
