package config_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentq/agentq/internal/config"
	"github.com/agentq/agentq/internal/problem"
)

// A schedule's spec path is read from the configuration file's directory;
// its input is kept as written.
func TestSchedulesConfig(t *testing.T) {
	path := write(t, good+`
schedules:
  - { name: nightly-report, cron: "30 2 * * *", spec: report.yaml, input: { region: emea, top: 3 } }
  - { name: tick, cron: "@every 1s", spec: report.yaml }
`)
	if err := os.WriteFile(filepath.Join(filepath.Dir(path), "report.yaml"), []byte("name: r\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := config.Load(config.Input{Path: path, LookupEnv: env(map[string]string{"OA_KEY": "k", "AN_KEY": "k"})})
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Schedules) != 2 || c.Schedules[0].Input["region"] != "emea" || c.Schedules[0].Input["top"] != 3 {
		t.Fatalf("schedules = %+v", c.Schedules)
	}
	if p := c.SpecPath(c.Schedules[1]); p != filepath.Join(filepath.Dir(path), "report.yaml") {
		t.Fatalf("spec path %s", p)
	}
	if _, err := config.ParseCron("@every 1s"); err != nil {
		t.Fatal(err)
	}
}

// Each problem is one line naming the schedule and the field.
func TestSchedulesConfigProblems(t *testing.T) {
	dir := t.TempDir()
	spec := filepath.Join(dir, "s.yaml")
	if err := os.WriteFile(spec, []byte("name: s\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	base := map[string]string{"OA_KEY": "k", "AN_KEY": "k"}
	for name, c := range map[string]struct{ block, want string }{
		"bad cron":     {`{ name: nightly, cron: "61 * * * *", spec: ` + spec + ` }`, `schedules.nightly.cron: "61 * * * *" is not a cron expression: `},
		"six fields":   {`{ name: nightly, cron: "* * * * * *", spec: ` + spec + ` }`, `schedules.nightly.cron: "* * * * * *" is not a cron expression: expected exactly 5 fields`},
		"bad every":    {`{ name: tick, cron: "@every soon", spec: ` + spec + ` }`, `schedules.tick.cron: "@every soon" is not a cron expression`},
		"never fires":  {`{ name: feb30, cron: "0 0 30 2 *", spec: ` + spec + ` }`, `schedules.feb30.cron: "0 0 30 2 *" never fires`},
		"no cron":      {`{ name: nightly, spec: ` + spec + ` }`, `schedules.nightly.cron: is empty`},
		"unknown spec": {`{ name: nightly, cron: "@hourly", spec: nope.yaml }`, `schedules.nightly.spec: cannot read ` + filepath.Join(dir, "nope.yaml") + `: no such file or directory`},
		"a directory":  {`{ name: nightly, cron: "@hourly", spec: ` + dir + ` }`, `schedules.nightly.spec: ` + dir + ` is a directory`},
		"bad name":     {`{ name: "my report", cron: "@hourly", spec: ` + spec + ` }`, `schedules[0].name: "my report": want letters, digits`},
	} {
		path := filepath.Join(dir, "agentq.yaml")
		if err := os.WriteFile(path, []byte(good+"\nschedules:\n  - "+c.block+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		_, err := config.Load(config.Input{Path: path, LookupEnv: env(base)})
		lines := problem.Lines(err)
		if len(lines) != 1 || !strings.Contains(lines[0], c.want) {
			t.Errorf("%s: %q, want one problem saying %q", name, lines, c.want)
		}
	}
	two := "\nschedules:\n  - { name: a, cron: \"@hourly\", spec: " + spec + " }\n  - { name: a, cron: \"@daily\", spec: " + spec + " }\n"
	_, err := config.Load(config.Input{Path: write(t, good+two), LookupEnv: env(base)})
	if lines := problem.Lines(err); len(lines) != 1 || !strings.Contains(lines[0], `schedules[1].name: "a" is used by another schedule`) {
		t.Errorf("a name used twice: %q", lines)
	}
}
