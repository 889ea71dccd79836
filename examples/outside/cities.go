// Command cities is a worker built outside agentq's repository: three code
// steps' functions and a tool on top of agentq's worker.
//
//	go run . --config agentq.yaml
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/agentq/agentq"
)

func main() {
	cfgPath := flag.String("config", "agentq.yaml", "the worker's configuration")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := serve(ctx, *cfgPath); err != nil {
		fmt.Fprintln(os.Stderr, "cities:", err)
		os.Exit(1)
	}
}

// serve runs the worker until ctx ends.
func serve(ctx context.Context, cfgPath string, opts ...agentq.WorkerOption) error {
	cfg, err := agentq.LoadConfig(cfgPath)
	if err != nil {
		return err
	}
	w, err := agentq.NewWorker(cfg, opts...)
	if err != nil {
		return err
	}
	w.HandleStep("research", research)
	w.HandleStep("merge", merge)
	w.Tool("word_count", json.RawMessage(`{"type":"object","description":"counts the words of a text",
		"properties":{"text":{"type":"string"}},"required":["text"]}`), wordCount)
	return w.Run(ctx)
}

// Note is what research finds on one city.
type Note struct {
	City string `json:"city"`
	Text string `json:"text"`
}

// research is one instance of the map: it asks the model about its city.
func research(ctx context.Context, s *agentq.Step) (any, error) {
	var city string
	if err := s.Item(&city); err != nil {
		return nil, err // not a string: parked for a person
	}
	ans, err := s.LLM().Chat(ctx, "default", agentq.Request{Messages: []agentq.Message{
		{Role: "user", Content: "Research " + city + " in one sentence."}}})
	if err != nil {
		return nil, err // retried with backoff, the router having tried every target
	}
	return Note{City: city, Text: strings.TrimSpace(ans.Text)}, nil
}

// merge is the fan-in: it reads every instance of research, in order, a
// page at a time, and skips the ones that were dead-lettered.
func merge(ctx context.Context, s *agentq.Step) (any, error) {
	var notes []string
	missing := 0
	for v, err := range s.Outputs(ctx, "research") {
		if err != nil {
			return nil, err
		}
		if v.Missing {
			missing++
			continue
		}
		var n Note
		if err := json.Unmarshal([]byte(v.Output), &n); err != nil {
			return nil, agentq.DeadLetter(fmt.Errorf("a research output is not a note: %w", err))
		}
		notes = append(notes, n.City+": "+n.Text)
	}
	return map[string]any{"notes": strings.Join(notes, "\n"), "cities": len(notes), "missing": missing}, nil
}

// wordCount is the report's tool.
func wordCount(_ context.Context, args json.RawMessage) (any, error) {
	var a struct {
		Text string `json:"text"`
	}
	if err := json.Unmarshal(args, &a); err != nil {
		return nil, agentq.FatalToolError(err)
	}
	return map[string]int{"words": len(strings.Fields(a.Text))}, nil
}
