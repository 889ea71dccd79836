package llmclient_test

import (
	"strings"
	"testing"

	"github.com/agentq/agentq/llmclient"
)

// Every dialect builds its adapter from the table, which gives it its
// GenAI provider name; a kind not in it is refused naming the ones that
// are.
func TestDialects(t *testing.T) {
	ds := llmclient.Dialects()
	if len(ds) < 2 {
		t.Fatalf("dialects %+v", ds)
	}
	for _, d := range ds {
		p, err := llmclient.NewProvider(d.Kind, llmclient.Options{Name: "p-" + d.Kind, Keys: []string{"k"}})
		if err != nil || p == nil || p.Name() != "p-"+d.Kind {
			t.Errorf("%s: %v %v", d.Kind, p, err)
			continue
		}
		if d.GenAI == "" || llmclient.GenAIName(p) != d.GenAI {
			t.Errorf("%s: gen_ai.provider.name %q, its provider's %q: every dialect names its API for LLM spans", d.Kind, d.GenAI, llmclient.GenAIName(p))
		}
	}
	if _, err := llmclient.NewProvider("gemini", llmclient.Options{Name: "g", Keys: []string{"k"}}); err == nil || !strings.Contains(err.Error(), "anthropic or openai") {
		t.Errorf("an unknown kind: %v", err)
	}
}
