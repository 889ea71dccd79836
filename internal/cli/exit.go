// Package cli holds the agentq command trees (worker, enqueue, dashboard).
// Each command takes its writers, logger and environment as inputs, so
// tests drive it with SetArgs; main packages only call Run.
package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/agentq/agentq"
	"github.com/agentq/agentq/internal/client"
	"github.com/agentq/agentq/internal/config"
	"github.com/agentq/agentq/internal/flow"
	"github.com/agentq/agentq/internal/problem"
)

// Exit codes, the same for every command (the README's table).
const (
	ExitOK           = 0
	ExitFailed       = 1 // the workflow failed, was dead-lettered, canceled or timed out (with --wait)
	ExitUsage        = 2 // bad usage or input: a bad flag, spec or id, a missing workflow or dead letter, a refused token
	ExitUnreachable  = 3 // cannot reach Redis, or it cannot serve now (a failover, CLUSTERDOWN); or the dashboard, with --server
	ExitStillRunning = 4 // --wait gave up (--wait-timeout) while the workflow still runs
	ExitNoWorkers    = 5 // no live worker serves the spec (--no-check submits anyway)
	ExitNotConfirmed = 6 // written to the Redis primary, not confirmed by the replicas redis.durability asks for
	ExitOverLimit    = 7 // refused: a bound of limits: is reached (limits.max_kept_signals); nothing was written, try again later
)

// ExitError carries an exit code.
type ExitError struct {
	Code int
	Err  error
}

func (e *ExitError) Error() string { return e.Err.Error() }
func (e *ExitError) Unwrap() error { return e.Err }

func usageErr(format string, a ...any) error {
	return &ExitError{Code: ExitUsage, Err: fmt.Errorf(format, a...)}
}

// Env is what a command tree gets from its process.
type Env struct {
	Out, Err  io.Writer
	LookupEnv func(string) (string, bool) // nil: os.LookupEnv
	// Logger, when nil, is built from --log-level as JSON on Err.
	Logger *slog.Logger
}

func (e *Env) lookup(k string) (string, bool) {
	if e.LookupEnv == nil {
		return os.LookupEnv(k)
	}
	return e.LookupEnv(k)
}

// Code maps an error to an exit code.
func Code(err error) int {
	var ee *ExitError
	switch {
	case err == nil:
		return ExitOK
	case errors.As(err, &ee):
		return ee.Code
	case errors.Is(err, agentq.ErrNotConfirmed):
		return ExitNotConfirmed
	case errors.Is(err, agentq.ErrOverLimit):
		return ExitOverLimit
	case errors.Is(err, agentq.ErrUnreachable),
		// the worker and the dashboard commands, which reach Redis
		// without agentq.Client
		errors.Is(err, client.ErrRedisUnreachable), flow.Unavailable(err):
		return ExitUnreachable
	case errors.Is(err, agentq.ErrNoWorkers):
		return ExitNoWorkers
	case errors.Is(err, agentq.ErrInvalidSpec), errors.Is(err, agentq.ErrNotFound), errors.Is(err, agentq.ErrNoDeadLetter),
		errors.Is(err, agentq.ErrUnknownClass), errors.Is(err, agentq.ErrUnknownState), errors.Is(err, agentq.ErrUnauthorized), errors.Is(err, agentq.ErrUnknownKey):
		return ExitUsage
	}
	var fe *config.FieldError
	if errors.As(err, &fe) {
		return ExitUsage
	}
	return ExitFailed
}

// Run executes a command tree with the process's arguments and signals and
// returns the exit code. Errors are printed to stderr, one line each.
func Run(cmd *cobra.Command, env Env, args []string) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	env = env.terminalSafe()
	cmd.SetArgs(args)
	cmd.SetOut(env.Out)
	cmd.SetErr(env.Err)
	err := cmd.ExecuteContext(ctx)
	if err == nil {
		return ExitOK
	}
	code := Code(err)
	if isCobraUsage(err) {
		code = ExitUsage
	}
	for _, line := range problems(err) {
		fmt.Fprintf(env.Err, "%s: %s\n", cmd.Name(), line)
	}
	return code
}

// problems splits joined errors into one line each.
func problems(err error) []string {
	var ee *ExitError
	if errors.As(err, &ee) {
		err = ee.Err
	}
	return problem.Lines(err)
}

func isCobraUsage(err error) bool {
	msg := err.Error()
	for _, p := range []string{"unknown command", "unknown flag", "unknown shorthand flag", "accepts ", "requires at least", "requires exactly", "invalid argument", "flag needs an argument", "required flag"} {
		if strings.Contains(msg, p) {
			return true
		}
	}
	return false
}
