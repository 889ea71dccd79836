package agentq_test

import (
	"context"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/agentq/agentq"
	"github.com/agentq/agentq/llmclient"
)

// A route as a provider, outside any workflow: the call goes through the
// route's targets, keys, breakers, limits and budgets, shared with the
// workers on the same Redis, and is tried again after the backoff when
// every target failed. (Not run: it needs the configured Redis and
// providers; router_test.go runs the same calls against chaosllm.)
func ExampleNewRouter() {
	cfg, err := agentq.LoadConfig("agentq.yaml")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute) // bounds the retries too
	defer cancel()
	r, err := agentq.NewRouter(ctx, cfg, agentq.WithRouterRetries(3))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return
	}
	defer r.Close()
	var p llmclient.Provider
	if p, err = r.Provider("report"); err != nil {
		fmt.Fprintln(os.Stderr, err) // agentq.ErrUnknownRoute: a route the configuration does not name
		return
	}
	resp, err := p.Chat(ctx, agentq.Request{Messages: []agentq.Message{{Role: "user", Content: "Summarise Q3 sales"}}})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return
	}
	fmt.Printf("%s (answered by %s/%s)\n", resp.Text, resp.Provider, resp.Model)

	// the same route, streamed
	st, err := p.ChatStream(ctx, agentq.Request{Messages: []agentq.Message{{Role: "user", Content: "Write the Q3 report"}}})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return
	}
	defer st.Close()
	for {
		piece, err := st.Recv()
		if err == io.EOF {
			break
		}
		if err != nil { // a failure after the first piece: the text so far is all there is
			fmt.Fprintln(os.Stderr, err)
			return
		}
		fmt.Print(piece)
	}
}
