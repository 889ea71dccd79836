package cli

import (
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/agentq/agentq/internal/spec"
)

// checkInputs refuses (or, with allowUnused, warns about) --input keys no
// template of the spec reads: a typo would otherwise be accepted silently.
func checkInputs(stderr io.Writer, wspec *spec.Spec, inputs []string, allowUnused bool) error {
	read, all := wspec.InputKeys()
	if all {
		return nil
	}
	for _, kv := range inputs {
		k, _, _ := strings.Cut(kv, "=")
		if k == "" || slices.Contains(read, k) {
			continue
		}
		msg := fmt.Sprintf("--input %s: no template of the spec reads .Input.%s (it reads: %s)", k, k, orNone(read))
		if !allowUnused {
			return usageErr("%s; --allow-unused-input submits anyway", msg)
		}
		fmt.Fprintln(stderr, "warning:", msg)
	}
	return nil
}

func orNone(keys []string) string {
	if len(keys) == 0 {
		return "none"
	}
	return strings.Join(keys, ", ")
}

func applyInputs(wspec *spec.Spec, inputs []string) error {
	for _, kv := range inputs {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return usageErr("--input %q: want key=value", kv)
		}
		if wspec.Input == nil {
			wspec.Input = map[string]any{}
		}
		wspec.Input[k] = v
	}
	return nil
}
