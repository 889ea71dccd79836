package spec

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// IsHidingRune reports a bidirectional formatting character: it reorders
// the text shown around it (U+202A–U+202E embeddings and overrides,
// U+2066–U+2069 isolates, U+200E/U+200F marks, U+061C), so a name holding
// one can show as another.
func IsHidingRune(r rune) bool {
	return (r >= 0x202a && r <= 0x202e) || (r >= 0x2066 && r <= 0x2069) || r == 0x200e || r == 0x200f || r == 0x061c
}

func hidingOrControl(r rune) bool { return unicode.IsControl(r) || IsHidingRune(r) }

// The checks a spec passes at submit: every problem, with its line.

func (s *Spec) validate(routes map[string]bool, lim Limits) error {
	var errs []error
	bad := func(line int, where, format string, a ...any) {
		errs = append(errs, &SpecError{Line: s.fieldLine(line, where), Where: where, Msg: fmt.Sprintf(format, a...)})
	}
	if strings.TrimSpace(s.Name) == "" {
		bad(0, "name", "is empty")
	} else if i := strings.IndexFunc(s.Name, hidingOrControl); i >= 0 {
		r, _ := utf8.DecodeRuneInString(s.Name[i:])
		bad(0, "name", "holds %U at byte %d: a control or bidirectional formatting character, which would act on a terminal or disguise the name", r, i)
	}
	if len(s.Steps) == 0 {
		bad(0, "steps", "is empty")
	}
	s.checkBudget(bad)
	s.checkConcurrency(s.Concurrency, 0, "concurrency", bad)
	checkWait(s.Deadline, s.topLines["deadline"] > 0, 0, lim, 0, "deadline", bad)
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
		checkKindFields(&s.Steps[i], where, bad)
		KindOf(&s.Steps[i]).Check(s, &s.Steps[i], where, lim, bad)
		checkMap(&s.Steps[i], where, lim, bad)
		s.checkOutput(&s.Steps[i], where, lim, bad)
		s.checkTools(&s.Steps[i], where, bad)
		checkCommon(st.line, where, st.Route, st.Timeout, st.MaxRetries, st.Queue)
		s.checkConcurrency(st.Concurrency, lineOr(st.fieldLines["concurrency"], st.line), where+".concurrency", bad)
	}
	if len(index) != len(s.Steps) {
		return errors.Join(capProblems(errs)...) // dependencies name ids: check them once the ids are sound
	}
	s.indexGraph()
	fieldProblems := len(errs)
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
	if len(errs) > fieldProblems {
		return errors.Join(capProblems(errs)...) // the graph is not sound: no cycle or template check
	}
	if cycle := s.findCycle(); cycle != nil {
		bad(0, "steps", "dependency cycle: %s", strings.Join(cycle, " → "))
		return errors.Join(capProblems(errs)...)
	}
	for i, st := range s.Steps {
		where := fmt.Sprintf("steps[%d] (%s)", i, st.ID)
		for _, f := range []struct {
			name, text string
			line       int
		}{{"prompt", st.Prompt, st.promptLine}, {"system", st.System, st.systemLine}, {"with", withText(st.With), st.withLine},
			{"for_each", st.ForEach, st.fieldLines["for_each"]}, {"wait_for.match", waitMatch(&st), st.fieldLines["wait_for"]},
			{"workflow.input", childInputText(&st), st.fieldLines["workflow"]}} {
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
				dep, _ := s.Step(r.step)
				switch {
				case !anc[r.step]:
					bad(line, where+"."+f.name, "refers to .Steps.%s, which is not a step it depends on (directly or not)", r.step)
				case readProblem(dep, r.step, r.field) != "":
					bad(line, where+"."+f.name, "%s", readProblem(dep, r.step, r.field))
				case r.field == "JSON" && len(r.path) > 0:
					if schema, ok := dep.Output.schemaMap(); ok {
						if why := schemaRefuses(schema, r.path); why != "" {
							bad(line, where+"."+f.name, "reads .Steps.%s.JSON.%s, which step %s's output.schema cannot have: %s",
								r.step, strings.Join(r.path, "."), r.step, why)
						}
					}
				}
			}
			if t, _ := parseTemplate(st.ID+"."+f.name, f.text); readsItem(t) && !hasItem(&s.Steps[i], f.name) {
				bad(line, where+"."+f.name, "reads .Item or .Index, which only a map step's (for_each) prompt, system and with: have")
			}
		}
	}
	return errors.Join(capProblems(errs)...)
}

// maxProblems caps how many problems one spec reports.
const maxProblems = 50

// capProblems keeps the first maxProblems and says how many more there are.
func capProblems(errs []error) []error {
	if len(errs) <= maxProblems {
		return errs
	}
	return append(errs[:maxProblems:maxProblems], &SpecError{Msg: fmt.Sprintf("… and %d more problems", len(errs)-maxProblems)})
}

var fieldOfStep = regexp.MustCompile(`^steps\[(\d+)\][^.]*\.([a-z_]+)`)

// LineOf is the line of the spec's source a problem's Where (SpecError)
// names: a step's field, a step, or a top-level field; 0 if unknown. A
// problem found elsewhere (a dashboard that checked the spec against its
// workers) is put back on the submitter's own file with it.
func (s *Spec) LineOf(where string) int {
	if l := s.fieldLine(0, where); l > 0 {
		return l
	}
	if m := stepOfWhere.FindStringSubmatch(where); m != nil {
		if i, _ := strconv.Atoi(m[1]); i < len(s.Steps) {
			return s.Steps[i].line
		}
	}
	return 0
}

// stepOfWhere reads the step's index of a Where ("steps[2] (clean)…").
var stepOfWhere = regexp.MustCompile(`^steps\[(\d+)\]`)

// fieldLine is the line of the field a problem names (steps[2] (x).route:
// the line of that step's route), or line when the spec has no such field
// (it is missing, or the spec came as JSON).
func (s *Spec) fieldLine(line int, where string) int {
	m := fieldOfStep.FindStringSubmatch(where)
	if m == nil {
		if key, _, _ := strings.Cut(where, "."); line == 0 {
			return s.topLines[key] // a top-level field's (name, deadline, budget…); 0 if unknown
		}
		return line
	}
	i, _ := strconv.Atoi(m[1])
	if i < len(s.Steps) {
		if l := s.Steps[i].fieldLines[m[2]]; l > 0 {
			return l
		}
	}
	return line
}
