// Package chaoscli is the chaosllm command: the fake LLM provider served
// over HTTP. It imports no client code (llmclient, retry, tasks).
package chaoscli

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"

	"github.com/spf13/cobra"

	"github.com/agentq/agentq/internal/chaosllm"
)

// ErrUsage marks bad flags or an invalid scenario (exit code 2).
var ErrUsage = errors.New("usage")

// Command returns the chaosllm command. ready, if not nil, is called with
// the listening address.
func Command(out, errOut io.Writer, ready func(addr string)) *cobra.Command {
	var addr, scenario string
	cmd := &cobra.Command{
		Use:   "chaosllm",
		Short: "A fake LLM provider with scripted faults",
		Long: `chaosllm serves the OpenAI chat completions API (POST /v1/chat/completions,
plain and streaming) and the Anthropic messages API (POST /v1/messages) with
deterministic answers derived from the prompt, following a scenario of
phases with latency and faults. GET /stats counts calls per endpoint, key
and outcome; PUT /admin/scenario replaces the scenario; POST /admin/reset
restarts the timeline and the counters. See docs/chaosllm.md.`,
		Example: `  chaosllm --addr 127.0.0.1:8081
  chaosllm --addr 127.0.0.1:8081 --scenario examples/analyst/outage.yaml`,
		Args:          cobra.NoArgs,
		SilenceUsage:  true,
		SilenceErrors: true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			log := slog.New(slog.NewJSONHandler(errOut, nil))
			var sc chaosllm.Scenario
			if scenario != "" {
				data, err := os.ReadFile(scenario)
				if err != nil {
					return fmt.Errorf("%w: --scenario: %v", ErrUsage, err)
				}
				if sc, err = chaosllm.ParseScenario(data); err != nil {
					return fmt.Errorf("%w: %s: %v", ErrUsage, scenario, err)
				}
			}
			srv, err := chaosllm.New(sc, chaosllm.Options{Logger: log})
			if err != nil {
				return fmt.Errorf("%w: %v", ErrUsage, err)
			}
			var listening net.Addr
			err = chaosllm.Serve(cmd.Context(), addr, srv, func(a net.Addr) {
				listening = a
				fmt.Fprintf(out, "chaosllm listening on http://%s (%d timelines)\n", a, len(sc.Timelines)+1)
				if ready != nil {
					ready(a.String())
				}
			})
			if err != nil && listening == nil {
				return fmt.Errorf("%w: --addr %s: %v", ErrUsage, addr, err)
			}
			return err
		},
	}
	cmd.Flags().StringVar(&addr, "addr", "127.0.0.1:8081", "listen address")
	cmd.Flags().StringVar(&scenario, "scenario", "", "scenario file (YAML or JSON); none: always healthy")
	return cmd
}
