package cli

import (
	"log/slog"
	"time"

	"github.com/spf13/cobra"

	"github.com/agentq/agentq/internal/config"
)

// What a command tree kept in its own package (so that a binary links only
// what its commands use) shares with the others here.

// Common is --config, --log-level and the settings flags of one command.
type Common struct{ c *common }

// AddCommon registers the shared flags (and the named settings' flags) on
// cmd; see addCommon.
func AddCommon(cmd *cobra.Command, env *Env, keys ...string) Common {
	return Common{c: addCommon(cmd, env, keys...)}
}

// Load reads the configuration: defaults < file < AGENTQ_* < flags.
func (c Common) Load(cmd *cobra.Command) (config.Config, error) { return c.c.load(cmd) }

// Logger is the command's JSON logger at --log-level, redacting secrets.
func (c Common) Logger(cmd *cobra.Command) (*slog.Logger, error) { return c.c.logger(cmd) }

// UsageErr is a bad-usage error (exit 2).
func UsageErr(format string, a ...any) error { return usageErr(format, a...) }

// AddWaitForRedis registers --wait-for-redis.
func AddWaitForRedis(cmd *cobra.Command, d *time.Duration) { addWaitForRedis(cmd, d) }

// Lookup reads a variable of the command's environment.
func (e *Env) Lookup(k string) (string, bool) { return e.lookup(k) }
