// Command chaosllm is a fake LLM provider with scripted faults. See
// `chaosllm --help` and docs/chaosllm.md.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/agentq/agentq/internal/chaoscli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	cmd := chaoscli.Command(os.Stdout, os.Stderr, nil)
	if err := cmd.ExecuteContext(ctx); err != nil {
		fmt.Fprintf(os.Stderr, "chaosllm: %v\n", err)
		if errors.Is(err, chaoscli.ErrUsage) {
			os.Exit(2)
		}
		os.Exit(1)
	}
}
