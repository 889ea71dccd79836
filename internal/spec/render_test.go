package spec

import "context"

// render is RenderContext without a deadline, for tests.
func render(t *Template, input map[string]any, steps map[string]StepView) (string, error) {
	return RenderContext(context.Background(), t, input, steps)
}
