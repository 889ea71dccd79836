package engine

import (
	"math"

	"github.com/agentq/agentq/internal/flow"
)

// costMicros prices prompt and completion tokens on target ("provider/
// model") in millionths of the prices' currency; 0 when target has no
// price.
func costMicros(prices map[string]flow.Price, target string, prompt, completion int) int64 {
	pr, ok := prices[target]
	if !ok {
		return 0
	}
	return int64(math.Round(float64(prompt)*pr.PromptPerMTok + float64(completion)*pr.CompletionPerMTok))
}
