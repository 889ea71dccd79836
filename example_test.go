package agentq_test

import (
	"context"
	"fmt"
	"os"
	"os/signal"

	"github.com/agentq/agentq"
	"github.com/agentq/agentq/agentqtest"
	"github.com/agentq/agentq/llmclient"
)

// A worker with one code step of its own; prompt steps need nothing more.
func ExampleNewWorker() {
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
	w.HandleStep("word_count", func(ctx context.Context, s *agentq.Step) (any, error) {
		var args struct{ Text string }
		if err := s.Args(&args); err != nil {
			return nil, agentq.DeadLetter(err) // no retry fixes bad arguments
		}
		return len(args.Text), nil
	})
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := w.Run(ctx); err != nil {
		fmt.Fprintln(os.Stderr, err)
	}
}

// A step's LLM calls are durable: when the step is tried again after a
// later failure, the answered calls are not made again.
func ExampleDo() {
	cmsUp := false // the CMS fails the first time
	headline := func(ctx context.Context, s *agentq.Step) (any, error) {
		draft, err := s.LLM().Chat(ctx, "report", llmclient.Request{Messages: []llmclient.Message{{Role: "user", Content: "draft a headline"}}})
		if err != nil {
			return nil, err
		}
		id, err := agentq.Do(ctx, s, "publish", func(ctx context.Context) (string, error) {
			if !cmsUp {
				cmsUp = true
				return "", fmt.Errorf("the CMS is down")
			}
			return "post-1", nil
		})
		if err != nil {
			return nil, err // retried with backoff; the draft is kept
		}
		return map[string]string{"headline": draft.Text, "id": id}, nil
	}
	m := agentqtest.NewModel().Answer("report", "Sales up 12%")
	s, _ := agentqtest.NewStep(agentqtest.Options{Model: m})
	_, err := s.Run(context.Background(), headline)
	fmt.Println("attempt 1:", err)
	out, _ := s.Run(context.Background(), headline)
	fmt.Println("attempt 2:", out, "- model requests:", len(m.Requests("report")))
	// Output:
	// attempt 1: the CMS is down
	// attempt 2: map[headline:Sales up 12% id:post-1] - model requests: 1
}

// Following a workflow as it runs: its steps, attempts, LLM calls and the
// text a streaming step writes, until it ends.
func ExampleClient_Events() {
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
	last := "" // the id of the last event read: pass it to resume
	for ev, err := range c.Events(ctx, "wf_abc123", last) {
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return
		}
		switch ev.Type {
		case agentq.EventDelta:
			fmt.Print(ev.Text)
		case agentq.EventFailed:
			fmt.Printf("\n%s attempt %d failed (%s), next at %v\n", ev.Step, ev.Attempt, ev.Class, ev.NextAttemptAt)
		case agentq.EventLLMCall:
			fmt.Printf("\n%s: %s answered in %dms\n", ev.Step, ev.Target, ev.LatencyMS)
		case agentq.EventEnded:
			fmt.Printf("\nworkflow %s\n", ev.State)
		}
		last = ev.ID
	}
}
