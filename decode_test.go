package agentq_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/agentq/agentq"
	"github.com/agentq/agentq/agentqtest"
)

type total struct {
	Region string  `json:"region"`
	Total  float64 `json:"total"`
}

// Decode reads a code step's value and a format: json answer (fenced or
// not) into a type; what does not fit is one clear error.
func TestDecodeReadsAStepsOutput(t *testing.T) {
	got, err := agentq.Decode[total](`{"region":"north","total":12.5}`)
	if err != nil || got != (total{"north", 12.5}) {
		t.Fatalf("Decode = %+v, %v", got, err)
	}
	rows, err := agentq.Decode[[]total]("```json\n[{\"region\":\"south\",\"total\":3}]\n```\n")
	if err != nil || len(rows) != 1 || rows[0] != (total{"south", 3}) {
		t.Fatalf("a fenced answer: %+v, %v", rows, err)
	}
	big, err := agentq.Decode[map[string]any](`{"id": 12345678901234567890}`)
	if n, ok := big["id"].(json.Number); err != nil || !ok || n.String() != "12345678901234567890" {
		t.Fatalf("a number into an any: %#v, %v (want the json.Number, exact)", big["id"], err)
	}
	for _, c := range []struct{ output, want string }{
		{"", "the output is empty"},
		{"  \n", "the output is empty"},
		{"The total is 12.", `output "The total is 12." does not fit agentq_test.total`},
		{`{"region":"north"} and more`, "more after the JSON value"},
		{`{"region": 7}`, "does not fit agentq_test.total"},
		{strings.Repeat("x", 500), "…"},
	} {
		_, err := agentq.Decode[total](c.output)
		if err == nil || !strings.Contains(err.Error(), c.want) || strings.Count(err.Error(), "\n") > 0 {
			t.Errorf("Decode(%.20q) = %v, want one line with %q", c.output, err, c.want)
		}
	}
}

// DecodeOutputs reads a map's outputs in item order: a missing instance
// is the zero value (nil for a pointer), a text instance a string, an
// output that does not fit an error naming its index.
func TestDecodeOutputsReadsAMapsOutputs(t *testing.T) {
	m := agentqtest.Map(total{"north", 1}, agentqtest.Missing, map[string]any{"region": "east", "total": 2.5})
	got, err := agentq.DecodeOutputs[*total](m.Map.Outputs)
	if err != nil || len(got) != 3 || *got[0] != (total{"north", 1}) || got[1] != nil || *got[2] != (total{"east", 2.5}) {
		t.Fatalf("DecodeOutputs = %v, %v", got, err)
	}
	texts, err := agentq.DecodeOutputs[string](agentqtest.Map(agentqtest.Text("oslo is cold"), agentqtest.Missing).Map.Outputs)
	if err != nil || len(texts) != 2 || texts[0] != "oslo is cold" || texts[1] != "" {
		t.Fatalf("text outputs: %q, %v", texts, err)
	}
	if _, err := agentq.DecodeOutputs[total](agentqtest.Map(total{}, agentqtest.Text("no figures")).Map.Outputs); err == nil ||
		!strings.Contains(err.Error(), `output 1 "\"no figures\"" does not fit agentq_test.total`) {
		t.Fatalf("a text instance into a struct: %v", err)
	}
	if all, err := agentq.Decode[[]*total](m.Map.Output()); err != nil || len(all) != 3 || all[1] != nil || all[2].Total != 2.5 {
		t.Fatalf("Decode of the map's Output: %v, %v", all, err)
	}
}

// A fan-in reads its map ancestor a page at a time with Step.Outputs and
// decodes each instance with Decode.
func TestAFanInDecodesEachInstance(t *testing.T) {
	sum := func(ctx context.Context, s *agentq.Step) (any, error) {
		var n float64
		for v, err := range s.Outputs(ctx, "per_region") {
			if err != nil {
				return nil, err
			}
			if v.Missing {
				continue
			}
			row, err := agentq.Decode[total](v.Output)
			if err != nil {
				return nil, agentq.DeadLetter(err)
			}
			n += row.Total
		}
		return n, nil
	}
	s, err := agentqtest.NewStep(agentqtest.Options{Steps: map[string]agentq.StepView{
		"per_region": agentqtest.Map(total{"north", 1.5}, agentqtest.Missing, total{"south", 2}),
	}})
	if err != nil {
		t.Fatal(err)
	}
	if out, err := s.Run(t.Context(), sum); err != nil || out != 3.5 {
		t.Fatalf("sum = %v, %v", out, err)
	}
	bad, _ := agentqtest.NewStep(agentqtest.Options{Steps: map[string]agentq.StepView{"per_region": agentqtest.Map(agentqtest.Text("n/a"))}})
	if _, err := bad.Run(t.Context(), sum); agentqtest.VerdictOf(err).Kind != "dead_letter" {
		t.Fatalf("an instance that does not fit: %v (%+v), want a dead letter", err, agentqtest.VerdictOf(err))
	}
}
