package spec

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"unicode"
)

// ConcurrencySpec bounds the steps in flight that share a concurrency
// key, across every workflow and worker: concurrency: { key:
// "{{ .Input.tenant }}", limit: 3 }. On a workflow it applies to each of
// its steps; on a step, to that step (instead of the workflow's). A step
// over its key's limit waits, holding no worker slot, and starts when one
// of its key's slots frees; keys wait and are served each on its own, so
// one key's backlog does not hold back another's.
type ConcurrencySpec struct {
	// Key is a template over .Input (rendered at submit and when the step
	// starts): the steps whose keys render the same share the limit.
	Key string `yaml:"key" json:"key"`
	// Limit is how many of the key's steps may be in flight at once, 1 to
	// MaxConcurrencyLimit.
	Limit int `yaml:"limit" json:"limit"`

	keyT *Template // Key parsed (Prepare); nil: parsed when rendered
}

// MaxConcurrencyLimit bounds a concurrency key's limit; MaxKeyBytes a
// rendered key.
const (
	MaxConcurrencyLimit = 100000
	MaxKeyBytes         = 200
)

// ConcurrencyOf is the concurrency key spec that bounds step st of s: the
// step's own, else the workflow's; nil: none.
func ConcurrencyOf(s *Spec, st *Step) *ConcurrencySpec {
	if st.Concurrency != nil {
		return st.Concurrency
	}
	return s.Concurrency
}

// RenderKey renders c's key over the workflow's input, and refuses a key
// that is empty, too long or holds a control character.
func RenderKey(ctx context.Context, c *ConcurrencySpec, input map[string]any) (string, error) {
	t := c.keyT
	if t == nil { // a spec not prepared (read as it is stored)
		var err error
		if t, err = parseTemplate("concurrency.key", c.Key); err != nil {
			return "", fmt.Errorf("concurrency.key: %w", err)
		}
	}
	k, err := RenderData(ctx, t, TemplateData{Input: input})
	if err != nil {
		return "", fmt.Errorf("concurrency.key: %w", err)
	}
	if why := missingInput(t, input, k); why != "" {
		// one key for every workflow without the field: they would share its slots
		return "", errors.New("concurrency.key " + why)
	}
	return k, checkKey(k)
}

func checkKey(k string) error {
	switch {
	case k == "":
		return fmt.Errorf("concurrency.key renders empty (does the input have the field it reads?)")
	case len(k) > MaxKeyBytes:
		return fmt.Errorf("concurrency.key renders %d bytes, over %d", len(k), MaxKeyBytes)
	case strings.IndexFunc(k, unicode.IsControl) >= 0:
		return fmt.Errorf("concurrency.key renders %q, which holds a control character", k)
	}
	return nil
}

// checkConcurrency checks a concurrency block at where: a key template
// that reads .Input only and a limit in range (the key is rendered when
// the input is final: CheckKeys).
func (s *Spec) checkConcurrency(c *ConcurrencySpec, line int, where string, bad ProblemFunc) {
	if c == nil {
		return
	}
	if c.Limit < 1 || c.Limit > MaxConcurrencyLimit {
		bad(line, where+".limit", "%d is not between 1 and %d", c.Limit, MaxConcurrencyLimit)
	}
	if strings.TrimSpace(c.Key) == "" {
		bad(line, where+".key", "is empty (say what the steps that share the limit have in common, e.g. {{ .Input.tenant }})")
		return
	}
	refs, err := templateRefs(where+".key", c.Key)
	if err != nil {
		bad(line, where+".key", "%v", err)
		return
	}
	t, _ := parseTemplate(where+".key", c.Key)
	if len(refs) > 0 || readsItem(t) {
		bad(line, where+".key", "reads .Steps or .Item: a key is a template over .Input only (it is known when the workflow is submitted)")
	}
}

// prepareKey parses c's key once, for every step that renders it.
func prepareKey(c *ConcurrencySpec) (err error) {
	if c != nil {
		c.keyT, err = parseTemplate("concurrency.key", c.Key)
	}
	return err
}

// CheckKeys renders s's concurrency keys over its input as submitted and
// refuses one that renders empty, too long or with a control character:
// the submit's check, once the input is final.
func CheckKeys(ctx context.Context, s *Spec) error {
	var errs []error
	check := func(c *ConcurrencySpec, where string) {
		if c == nil {
			return
		}
		if _, err := RenderKey(ctx, c, s.Input); err != nil {
			errs = append(errs, &SpecError{Where: where + ".key", Msg: strings.TrimPrefix(err.Error(), "concurrency.key ")})
		}
	}
	check(s.Concurrency, "concurrency")
	for i := range s.Steps {
		check(s.Steps[i].Concurrency, fmt.Sprintf("steps[%d] (%s).concurrency", i, s.Steps[i].ID))
	}
	return errors.Join(errs...)
}
