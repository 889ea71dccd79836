package engine

import "context"

// render is renderContext without a deadline, for tests.
func render(t *promptTemplate, input map[string]any, steps map[string]StepView) (string, error) {
	return renderContext(context.Background(), t, input, steps)
}
