package llmclient

import (
	"fmt"
	"slices"
	"strings"
)

// Dialect is one provider API agentq speaks: its kind (a configuration's
// providers[].kind), how its adapter is built, and what it needs.
type Dialect struct {
	Kind string
	// GenAI is the dialect's gen_ai.provider.name in OpenTelemetry's GenAI
	// semantic conventions (a well-known value), which LLM call spans
	// carry for observability tools to read.
	GenAI string
	// NeedsKey: the API refuses a call without an API key (else a
	// provider may have none: a local model).
	NeedsKey bool
	New      func(Options) (Provider, error)
}

// dialects is the one table of the dialects: a new one is its adapter's
// file, one line here and chaosllm's dialect file (its fake endpoint).
var dialects = []Dialect{
	{Kind: "anthropic", GenAI: "anthropic", NeedsKey: true, New: func(o Options) (Provider, error) { return newAnthropic(o) }},
	{Kind: "openai", GenAI: "openai", New: func(o Options) (Provider, error) { return newOpenAI(o) }}, // any OpenAI-compatible endpoint
}

// Dialects lists the dialects, by kind.
func Dialects() []Dialect { return slices.Clone(dialects) }

// NewProvider builds the adapter of dialect kind. It makes no network call.
func NewProvider(kind string, o Options) (Provider, error) {
	i := slices.IndexFunc(dialects, func(d Dialect) bool { return d.Kind == kind })
	if i < 0 {
		return nil, fmt.Errorf("llmclient: %q is not a provider kind (%s)", kind, kindList())
	}
	p, err := dialects[i].New(o)
	if err != nil {
		return nil, err
	}
	if g, ok := p.(interface{ setGenAI(string) }); ok {
		g.setGenAI(dialects[i].GenAI)
	}
	return p, nil
}

// GenAIName is provider p's gen_ai.provider.name (its dialect's GenAI):
// what OpenTelemetry's GenAI conventions call the API it speaks; "" for a
// provider NewProvider did not build.
func GenAIName(p Provider) string {
	if g, ok := p.(interface{ genAIName() string }); ok {
		return g.genAIName()
	}
	return ""
}

// kindList is the kinds, as a message lists them: "anthropic or openai".
func kindList() string {
	kinds := make([]string, len(dialects))
	for i, d := range dialects {
		kinds[i] = d.Kind
	}
	if len(kinds) == 1 {
		return kinds[0]
	}
	return strings.Join(kinds[:len(kinds)-1], ", ") + " or " + kinds[len(kinds)-1]
}
