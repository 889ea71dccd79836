package producer_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/agentq/agentq/internal/defaults"
	"github.com/agentq/agentq/internal/producer"
	"github.com/agentq/agentq/internal/redistest"
	"github.com/agentq/agentq/internal/spec"
)

// A producer parses a spec, submits it and reads its state. Workers (not
// running here) take the steps from the queue.
func ExampleClient() {
	_, rdb, err := redistest.Open()
	if err != nil {
		fmt.Println(err)
		return
	}
	defer rdb.Close()
	ctx := context.Background()
	c := producer.NewClient(rdb, producer.ClientOptions{Retention: defaults.Retention, Limits: spec.DefaultLimits(), Routes: []string{"default"}, NewKey: func() string { return "k_example" }})

	wspec, err := c.Parse("hello.yaml", []byte(`
name: hello
steps:
  - id: greet
    route: default
    prompt: "Say hello to {{ .Input.who }}"
`))
	if err != nil {
		fmt.Println(err)
		return
	}
	wspec.Input = map[string]any{"who": "Ada"}
	// no worker runs here: Submit refuses the spec, unless told not to check
	if _, err := c.Submit(ctx, wspec); errors.Is(err, producer.ErrNoWorkers) {
		fmt.Println("refused: no live worker")
	}
	id, err := c.Submit(ctx, wspec, producer.WithoutWorkerCheck())
	if err != nil {
		fmt.Println(err)
		return
	}
	wf, _ := c.Status(ctx, id)
	fmt.Println(wf.ID, wf.Name, wf.State, wf.Steps[0].ID, wf.Steps[0].State)

	// a spec naming an unknown route is refused before anything is written
	_, err = c.Parse("bad.yaml", []byte("name: x\nsteps:\n  - { id: a, route: nope, prompt: hi }\n"))
	fmt.Println(err)

	state, _ := c.Cancel(ctx, id)
	fmt.Println(state)
	// Output:
	// refused: no live worker
	// wf_5kudppc6tn7u3eutkpnq hello pending greet pending
	// bad.yaml:3: steps[0] (a).route: unknown route "nope"
	// canceled
}
