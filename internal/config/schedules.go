package config

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"time"

	"github.com/robfig/cron/v3"
)

// Schedule is one periodic workflow (docs/schedules.md): the workers whose
// configuration has schedules take one lease per schedule name in Redis,
// and the holder submits the spec once per slot of the cron expression.
// The zero value is not valid: name, cron and spec are required.
type Schedule struct {
	// Name names the schedule in Redis (its lease, its idempotency keys)
	// and in listings: letters, digits, ".", "_" and "-", at most 64.
	Name string `yaml:"name"`
	// Cron is when it runs, as github.com/robfig/cron/v3 parses a
	// standard expression: five fields ("30 2 * * *") or a descriptor
	// ("@hourly", "@every 10m"), in UTC unless it starts with
	// CRON_TZ=<zone>. "@every D" slots are multiples of D since the Unix
	// epoch, the same on every replica.
	Cron string `yaml:"cron"`
	// Spec is the workflow spec file; a relative path is read from the
	// configuration file's directory.
	Spec string `yaml:"spec"`
	// Input sets the spec's input keys for every run (over the spec's own).
	Input map[string]any `yaml:"input"`
}

// cronParser is the one parser of schedules' cron expressions.
var cronParser = cron.NewParser(cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

// ParseCron parses a schedule's cron expression.
func ParseCron(expr string) (cron.Schedule, error) { return cronParser.Parse(expr) }

// SpecPath is where a schedule's spec file is read from.
func (c *Config) SpecPath(s Schedule) string {
	if s.Spec == "" || filepath.IsAbs(s.Spec) || c.File == "" {
		return s.Spec
	}
	return filepath.Join(filepath.Dir(c.File), s.Spec)
}

var scheduleName = regexp.MustCompile(`^[A-Za-z0-9._-]{1,64}$`)

// validateSchedules checks each schedule: a unique name, a cron
// expression that parses and fires, a spec file that can be read.
func (c *Config) validateSchedules() []error {
	var errs []error
	seen := map[string]bool{}
	for i, s := range c.Schedules {
		f := fmt.Sprintf("schedules[%d]", i)
		bad := func(field, format string, a ...any) {
			errs = append(errs, &FieldError{Field: f + "." + field, Msg: fmt.Sprintf(format, a...)})
		}
		switch {
		case s.Name == "":
			bad("name", "is empty")
		case !scheduleName.MatchString(s.Name):
			bad("name", "%q: want letters, digits, '.', '_' or '-' (at most 64)", s.Name)
		case seen[s.Name]:
			bad("name", "%q is used by another schedule", s.Name)
		default:
			f = "schedules." + s.Name // the schedule's own name, from here on
		}
		seen[s.Name] = true
		if s.Cron == "" {
			bad("cron", "is empty (e.g. \"@every 1h\" or \"30 2 * * *\")")
		} else if sch, err := ParseCron(s.Cron); err != nil {
			bad("cron", "%q is not a cron expression: %v", s.Cron, err)
		} else if sch.Next(time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)).IsZero() {
			bad("cron", "%q never fires", s.Cron)
		}
		if s.Spec == "" {
			bad("spec", "is empty (the workflow spec file to run)")
		} else if st, err := os.Stat(c.SpecPath(s)); err != nil {
			bad("spec", "cannot read %s: %v", c.SpecPath(s), unwrapPath(err))
		} else if st.IsDir() {
			bad("spec", "%s is a directory, not a spec file", c.SpecPath(s))
		}
	}
	return errs
}

// unwrapPath drops the path an os error repeats.
func unwrapPath(err error) error {
	if pe, ok := err.(*os.PathError); ok {
		return pe.Err
	}
	return err
}
