package cli

import (
	"context"
	"errors"
	"io"
	"os"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/spf13/cobra"

	"github.com/agentq/agentq"
	"github.com/agentq/agentq/internal/mcpserve"
)

// mcpCmd is `enqueue mcp`: agentq's MCP tools (internal/mcpserve) on
// stdin and stdout, for an MCP client that starts the command.
func mcpCmd(c *common) *cobra.Command {
	var (
		readOnly bool
		maxWait  time.Duration
	)
	cmd := &cobra.Command{
		Use:   "mcp",
		Short: "Serve agentq's tools to an MCP client on stdin and stdout (Model Context Protocol)",
		Long: `mcp serves agentq as an MCP server (Model Context Protocol) on stdin and
stdout, for an MCP client (a desktop assistant, an IDE, an agent) that
starts it: its tools submit_workflow, workflow_status, workflow_result,
list_workflows, approve_step, reject_step, send_signal and cancel_workflow
do what the enqueue verbs do, over the same Redis (or --server). stdout
carries the protocol alone; logs go to stderr. It runs until stdin closes
or it is stopped (exit 0).

submit_workflow with wait: true waits for the workflow (at most
wait_seconds, 60 by default, never over --max-wait) and sends its steps'
progress as notifications/progress when the call has a progress token.
With --read-only only workflow_status, workflow_result and list_workflows
are served; a call to another is a tool error. docs/mcp-server.md shows a
client's configuration.`,
		Example: `  enqueue mcp --config /etc/agentq/agentq.yaml
  enqueue mcp --server https://agentq.example.com    # token: AGENTQ_DASHBOARD_TOKEN
  enqueue mcp --read-only`,
		Args: cobra.NoArgs,
	}
	cmd.Flags().BoolVar(&readOnly, "read-only", false, "serve only the tools that read (workflow_status, workflow_result, list_workflows)")
	cmd.Flags().DurationVar(&maxWait, "max-wait", mcpserve.DefaultMaxWait, "the longest a submit_workflow with wait may wait")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		if maxWait < time.Second {
			return usageErr("--max-wait: %s is under 1s", maxWait)
		}
		return withClient(cmd, c, func(cl *agentq.Client) error {
			srv, err := mcpserve.New(sdkBackend{cl}, mcpserve.Options{ReadOnly: readOnly, MaxWait: maxWait, Stop: cmd.Context()})
			if err != nil {
				return err
			}
			lim := c.loaded.Limits
			t := &mcp.IOTransport{Reader: io.NopCloser(cmd.InOrStdin()), Writer: nopWriteCloser{cmd.OutOrStdout()},
				MaxLineLength: int(mcpserve.MaxMessageBytes(lim.MaxSpecBytes, lim.MaxSignalBytes))}
			err = srv.Run(cmd.Context(), t)
			if err == nil || errors.Is(err, io.EOF) || errors.Is(err, os.ErrClosed) || cmd.Context().Err() != nil {
				return nil // stdin closed, or the command was stopped
			}
			return err
		})
	}
	return cmd
}

type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }

// sdkBackend is the SDK's client as the MCP tools' backend.
type sdkBackend struct{ *agentq.Client }

func (b sdkBackend) ListPage(ctx context.Context, o agentq.ListOptions) ([]*agentq.Workflow, error) {
	ws, err := b.List(ctx, o)
	if err != nil {
		return nil, err
	}
	out := make([]*agentq.Workflow, len(ws))
	for i := range ws {
		out[i] = &ws[i]
	}
	return out, nil
}

func (b sdkBackend) Decide(ctx context.Context, id, step string, approve bool, comment, by string) (string, error) {
	return b.Client.Decide(ctx, id, step, agentq.Decision{Approve: approve, Comment: comment, By: by})
}

func (b sdkBackend) Signal(ctx context.Context, s agentq.Signal) (*agentq.SignalResult, error) {
	return b.SendSignal(ctx, s)
}
