package agentq_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/agentq/agentq"
	"github.com/agentq/agentq/agentqtest"
)

// Total is what the examples' per-region steps return.
type Total struct {
	Region string  `json:"region"`
	Total  float64 `json:"total"`
}

// A code step (run: growth in the spec) reads its arguments (with:) and
// an ancestor's JSON output, and returns a value stored as its own
// output. agentqtest runs it here without Redis or a provider; a worker
// runs it with w.HandleStep("growth", growth).
func ExampleStep() {
	growth := func(ctx context.Context, s *agentq.Step) (any, error) {
		var args struct {
			Region string `json:"region"`
		}
		if err := s.Args(&args); err != nil {
			return nil, err // does not fit: dead-lettered at once
		}
		prev, ok := s.Step("last_year")
		if !ok || prev.Missing {
			return nil, agentq.DeadLetter(errors.New("no figures for last year"))
		}
		last, err := agentq.Decode[Total](prev.Output)
		if err != nil {
			return nil, agentq.DeadLetter(err)
		}
		return map[string]any{"region": args.Region, "growth": 130 / last.Total}, nil
	}
	s, _ := agentqtest.NewStep(agentqtest.Options{
		Args:  map[string]any{"region": "north"},
		Steps: map[string]agentq.StepView{"last_year": {Output: `{"region":"north","total":100}`}},
	})
	out, err := s.Run(context.Background(), growth)
	fmt.Println(out, err)
	// Output: map[growth:1.3 region:north] <nil>
}

// A client reads a workflow's answer, its final steps' outputs, into
// types of its own.
func ExampleDecode() {
	// res, err := c.Result(ctx, id); output := res.Final[0].Output
	output := "```json\n[{\"region\": \"north\", \"total\": 130}, {\"region\": \"south\", \"total\": 90}]\n```"
	totals, err := agentq.Decode[[]Total](output)
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, t := range totals {
		fmt.Printf("%s: %.0f\n", t.Region, t.Total)
	}
	_, err = agentq.Decode[Total]("I could not find the figures.")
	fmt.Println(err)
	// Output:
	// north: 130
	// south: 90
	// agentq.Decode: output "I could not find the figures." does not fit agentq_test.Total: invalid character 'I' looking for beginning of value
}

// A map step's outputs (a StepView's Map.Outputs, in item order) into a
// type: a missing instance (optional, dead-lettered) is nil.
func ExampleDecodeOutputs() {
	perRegion := agentqtest.Map(Total{"north", 130}, agentqtest.Missing, Total{"south", 90})
	totals, err := agentq.DecodeOutputs[*Total](perRegion.Map.Outputs)
	if err != nil {
		fmt.Println(err)
		return
	}
	for i, t := range totals {
		if t == nil {
			fmt.Println(i, "missing")
			continue
		}
		fmt.Println(i, t.Region, t.Total)
	}
	// Output:
	// 0 north 130
	// 1 missing
	// 2 south 90
}

// A reduce over a map step (for_each) reads its instances a page at a
// time, in item order, however many there are.
func ExampleStep_Outputs() {
	sum := func(ctx context.Context, s *agentq.Step) (any, error) {
		var sum float64
		missing := 0
		for v, err := range s.Outputs(ctx, "per_region") {
			if err != nil {
				return nil, err // a read that failed: the step is tried again
			}
			if v.Missing {
				missing++
				continue
			}
			t, err := agentq.Decode[Total](v.Output)
			if err != nil {
				return nil, agentq.DeadLetter(err)
			}
			sum += t.Total
		}
		return map[string]any{"of": s.Items("per_region"), "missing": missing, "sum": sum}, nil
	}
	s, _ := agentqtest.NewStep(agentqtest.Options{Steps: map[string]agentq.StepView{
		"per_region": agentqtest.Map(Total{"north", 130}, agentqtest.Missing, Total{"south", 90}),
	}})
	out, err := s.Run(context.Background(), sum)
	fmt.Println(out, err)
	// Output: map[missing:1 of:3 sum:220] <nil>
}

// A step streams the model's answer: onDelta gets the text as it comes,
// and Client.Events followers read it as step.delta events. The answer
// returned is the whole, kept durably: a retried step gets it back (in
// one piece) without asking again. agentqtest's model answers in one
// piece.
func ExampleLLM_Stream() {
	draft := func(ctx context.Context, s *agentq.Step) (any, error) {
		pieces := 0
		resp, err := s.LLM().Stream(ctx, "writer", agentq.Request{
			Messages: []agentq.Message{{Role: "user", Content: "Draft a one-line summary of the sales report."}},
		}, func(delta string) {
			pieces++
			fmt.Printf("piece %d: %s\n", pieces, delta) // show it, forward it to a browser, …
		})
		if err != nil {
			return nil, err
		}
		return resp.Text, nil
	}
	m := agentqtest.NewModel().Answer("writer", "Sales grew 12%, led by the north.")
	s, _ := agentqtest.NewStep(agentqtest.Options{Model: m})
	out, err := s.Run(context.Background(), draft)
	fmt.Println("output:", out, err)
	// Output:
	// piece 1: Sales grew 12%, led by the north.
	// output: Sales grew 12%, led by the north. <nil>
}

// The test kit: a scripted model per route (answers and failures in
// order), the step's arguments, and the worker's reading of an error
// (VerdictOf). A second Run is the step's retry: the calls answered
// before are replayed, not sent again.
func Example_testKit() {
	classify := func(ctx context.Context, s *agentq.Step) (any, error) {
		var args struct{ Text string }
		if err := s.Args(&args); err != nil {
			return nil, err
		}
		if args.Text == "" {
			return nil, agentq.DeadLetter(errors.New("nothing to classify"))
		}
		resp, err := s.LLM().Chat(ctx, "fast", agentq.Request{Messages: []agentq.Message{{Role: "user", Content: "Classify: " + args.Text}}})
		if err != nil {
			return nil, err // the provider's failure: retried with backoff
		}
		return strings.ToLower(resp.Text), nil
	}
	m := agentqtest.NewModel().Fail("fast", errors.New("503 from the provider")).Answer("fast", "COMPLAINT")
	s, _ := agentqtest.NewStep(agentqtest.Options{Args: map[string]any{"text": "my order is late"}, Model: m})
	_, err := s.Run(context.Background(), classify)
	fmt.Println("attempt 1:", agentqtest.VerdictOf(err).Kind, err)
	out, err := s.Run(context.Background(), classify)
	fmt.Println("attempt 2:", out, err, "- requests:", len(m.Requests("fast")))

	empty, _ := agentqtest.NewStep(agentqtest.Options{Args: map[string]any{"text": ""}})
	_, err = empty.Run(context.Background(), classify)
	fmt.Println("no text:", agentqtest.VerdictOf(err).Kind)
	// Output:
	// attempt 1: retry 503 from the provider
	// attempt 2: complaint <nil> - requests: 2
	// no text: dead_letter
}

// A tool the model may call from a prompt step that offers it; the
// worker runs the model–tool loop, every turn kept durably.
func ExampleWorker_Tool() {
	cfg, err := agentq.LoadConfig("agentq.yaml")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return
	}
	w, err := agentq.NewWorker(cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return
	}
	schema := json.RawMessage(`{"type": "object", "description": "A region's sales total",
		"required": ["region"], "properties": {"region": {"type": "string"}}}`)
	w.Tool("sales_total", schema, func(ctx context.Context, args json.RawMessage) (any, error) {
		var a struct{ Region string }
		if err := json.Unmarshal(args, &a); err != nil {
			return nil, err // goes back to the model as an error result
		}
		if a.Region == "" {
			return nil, agentq.FatalToolError(errors.New("no region")) // ends the step: dead-lettered
		}
		return Total{Region: a.Region, Total: 130}, nil
	})
	// a spec's prompt step offers it:
	//   - { id: answer, route: main, prompt: "How did the north do?", tools: [sales_total] }
	if err := w.Run(context.Background()); err != nil {
		fmt.Fprintln(os.Stderr, err)
	}
}

// A workflow that waits for a signal from outside (a payment, a reply),
// and the producer that sends it: the waiting step's output is the
// signal's data.
func ExampleClient_Signal() {
	cfg, err := agentq.LoadConfig("agentq.yaml")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return
	}
	ctx := context.Background()
	c, err := agentq.NewClient(ctx, cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return
	}
	defer c.Close()
	spec, err := c.Parse("order.yaml", []byte(`
name: order
input: { order_id: "42" }
steps:
  - id: paid
    wait_for: { signal: payment.succeeded, match: "{{ .Input.order_id }}", timeout: 24h }
  - { id: ship, depends_on: [paid], route: main, prompt: "Write the shipping note for {{ .Steps.paid.JSON.amount }} cents" }
`))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return
	}
	id, err := c.Submit(ctx, spec)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return
	}
	// later, from the payment provider's webhook:
	res, err := c.SendSignal(ctx, agentq.Signal{Name: "payment.succeeded", Match: "42",
		Data: json.RawMessage(`{"amount": 1999}`), IdempotencyKey: "evt_1NkX"})
	if err != nil {
		fmt.Fprintln(os.Stderr, err) // errors.Is(err, agentq.ErrBadSignal), ErrOverLimit, …
		return
	}
	fmt.Println(id, "completed:", len(res.Delivered), "kept:", res.Kept, "duplicate:", res.Duplicate)
}

// A child workflow: a parent's step runs a stored spec as a workflow of
// its own (workflow: { spec: NAME }); its output is the child's. A worker
// stores the specs it registers when it starts; a client reads them back.
func ExampleWorker_RegisterSpec() {
	cfg, err := agentq.LoadConfig("agentq.yaml")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return
	}
	w, err := agentq.NewWorker(cfg, agentq.WithWaitForRedis(2*time.Minute))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return
	}
	w.RegisterSpec("region", []byte(`
name: region
steps:
  - { id: total, run: sales_total, with: { region: "{{ .Input.region }}" } }
`))
	w.RegisterSpec("report", []byte(`
name: report
input: { regions: [north, south] }
steps:
  - id: per_region
    for_each: "{{ .Input.regions }}"
    workflow: { spec: region, input: { region: "{{ .Item }}" } }
  - { id: report, depends_on: [per_region], route: main, prompt: "Write the report from {{ .Steps.per_region.Outputs }}" }
`))
	w.HandleStep("sales_total", func(ctx context.Context, s *agentq.Step) (any, error) {
		var args struct{ Region string }
		if err := s.Args(&args); err != nil {
			return nil, err
		}
		return Total{Region: args.Region, Total: 130}, nil
	})
	ctx := context.Background()
	go func() {
		if err := w.Run(ctx); err != nil {
			fmt.Fprintln(os.Stderr, err)
		}
	}()

	c, err := agentq.NewClient(ctx, cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return
	}
	defer c.Close()
	report, version, err := c.StoredSpec(ctx, "report", 0) // the latest version
	if err != nil {
		fmt.Fprintln(os.Stderr, err) // errors.Is(err, agentq.ErrNoSpec) until the worker has started
		return
	}
	id, err := c.Submit(ctx, report)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return
	}
	wf, err := c.Wait(ctx, id, time.Second)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return
	}
	fmt.Println("report version", version, wf.State)
}
