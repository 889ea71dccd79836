package cli

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"

	"github.com/agentq/agentq"
)

// signalCmd is `enqueue signal NAME --match V --data JSON`: a signal to
// the signal steps (wait_for:) waiting on it.
func signalCmd(c *common) *cobra.Command {
	var (
		match, data, dataFile, key string
		asJSON                     bool
	)
	cmd := &cobra.Command{
		Use:   "signal NAME [--match VALUE] [--data JSON | --data-file FILE]",
		Short: "Send a signal to the steps waiting on it (wait_for:)",
		Long: `signal completes every signal step (wait_for: in a spec) that is waiting
on NAME with a match value equal to --match at the moment it is sent; the
data (JSON, default null) is their output, read by their dependents as
.Steps.STEP.JSON. If no step waits, the signal is kept (signals.keep in
agentq.yaml, 10m by default) and the first step that begins waiting on it
takes it. With --idempotency-key, the signal is sent once: a second send of
the key (same NAME and --match) within the retention, or one at the same
time, is a no-op that prints the first send's id (exit 0; "duplicate": true
with --json). Only a first send cut short (its sender died or failed
mid-send) is finished by the next send of the key, with its id and data.

The data is at most limits.max_signal_bytes (64 KiB by default; past it,
exit 2). A signal no step waits for while limits.max_kept_signals are kept
(10,000 by default) is refused with exit 7: nothing is sent (an
--idempotency-key is free to send again); send it again later.

It prints the steps it completed, or that it was kept.`,
		Example: `  enqueue signal payment.succeeded --match order-42 --data '{"amount": 1999}'
  enqueue signal ci.finished --match "$GIT_SHA" --data-file result.json --idempotency-key "ci-$RUN_ID"`,
		Args: cobra.ExactArgs(1),
	}
	cmd.Flags().StringVar(&match, "match", "", "the value the waiting steps' wait_for.match renders to")
	cmd.Flags().StringVar(&data, "data", "", "the signal's data, as JSON (the completed steps' output)")
	cmd.Flags().StringVar(&dataFile, "data-file", "", "read the data from this file (- for stdin)")
	cmd.Flags().StringVar(&key, "idempotency-key", "", "send once: another send with this key is a no-op (a duplicate)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print what the send did as one JSON document")
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		if data != "" && dataFile != "" {
			return usageErr("signal: --data and --data-file: give one")
		}
		raw := []byte(data)
		if dataFile != "" {
			var err error
			if raw, err = readData(dataFile, cmd.InOrStdin()); err != nil {
				return usageErr("signal: --data-file: %v", err)
			}
		}
		if err := checkJSON(raw); err != nil {
			from := "--data"
			if dataFile != "" {
				from = "--data-file"
			}
			return usageErr("signal: %s: data is not JSON: %v", from, err)
		}
		if cmd.Flags().Changed("idempotency-key") && key == "" {
			return usageErr("signal: --idempotency-key is empty")
		}
		return withClient(cmd, c, func(cl *agentq.Client) error {
			res, err := cl.SendSignal(cmd.Context(), agentq.Signal{Name: args[0], Match: match, Data: json.RawMessage(raw), IdempotencyKey: key})
			if errors.Is(err, agentq.ErrBadSignal) || errors.Is(err, agentq.ErrBadIdempotencyKey) {
				return usageErr("signal: %v", err)
			}
			if err != nil {
				return err
			}
			if asJSON {
				return printJSON(cmd.OutOrStdout(), res)
			}
			out := cmd.OutOrStdout()
			switch {
			case res.Duplicate && res.Kept:
				fmt.Fprintf(out, "%s: a duplicate of signal %s, cut short: finished, kept until %s for the first step that waits\n", args[0], res.ID, res.KeptUntil.Format("2006-01-02T15:04:05Z07:00"))
			case res.Duplicate && len(res.Delivered) > 0:
				fmt.Fprintf(out, "%s: a duplicate of signal %s, cut short: finished, completed %d waiting step(s)\n", args[0], res.ID, len(res.Delivered))
			case res.Duplicate:
				fmt.Fprintf(out, "%s: a duplicate of signal %s (idempotency key sent before, or being sent): nothing sent\n", args[0], res.ID)
			case res.Kept:
				fmt.Fprintf(out, "%s: no step waits; kept until %s for the first that does (signal %s)\n", args[0], res.KeptUntil.Format("2006-01-02T15:04:05Z07:00"), res.ID)
			default:
				fmt.Fprintf(out, "%s: completed %d waiting step(s) (signal %s)\n", args[0], len(res.Delivered), res.ID)
			}
			for _, t := range res.Delivered {
				fmt.Fprintf(out, "  %s %s\n", t.Workflow, t.Step)
			}
			return nil
		})
	}
	return cmd
}

// checkJSON refuses data that is not one JSON value (anything after it
// but white space included); empty data is null. The send checks it too,
// but over --server it must be JSON to be sent at all.
func checkJSON(raw []byte) error {
	if len(bytes.TrimSpace(raw)) == 0 {
		return nil
	}
	var b bytes.Buffer
	return json.Compact(&b, raw)
}

// maxDataRead bounds what --data-file reads: past it, the data is refused
// as too long whatever the limit (limits.max_signal_bytes, checked by the
// send), without reading a file of any size into memory.
const maxDataRead = 64 << 20

// readData reads --data-file (- for stdin), bounded.
func readData(name string, stdin io.Reader) ([]byte, error) {
	r := stdin
	if name != "-" {
		f, err := os.Open(name)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		r = f
	}
	return io.ReadAll(io.LimitReader(r, maxDataRead+1))
}
