package cli

import (
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/agentq/agentq/internal/config"
	"github.com/agentq/agentq/redact"
)

// common holds the flags every command shares.
type common struct {
	env      *Env
	config   string
	logLevel string
	settings []config.Setting
	loaded   config.Config // the configuration load returned last
	// providerKeys: load expands and keeps providers[].keys (the worker);
	// every other command holds no provider secret
	providerKeys bool
}

// addCommon registers --config, --log-level and the flags of the given
// settings (by key) on cmd.
func addCommon(cmd *cobra.Command, env *Env, keys ...string) *common {
	c := &common{env: env}
	f := cmd.PersistentFlags()
	f.StringVar(&c.config, "config", "", "configuration file (default agentq.yaml if present; env AGENTQ_CONFIG)")
	f.StringVar(&c.logLevel, "log-level", "info", "log level: debug, info, warn, error (env AGENTQ_LOG_LEVEL)")
	want := map[string]bool{}
	for _, k := range keys {
		want[k] = true
	}
	for _, s := range config.Settings() {
		if len(keys) == 0 || want[s.Key] {
			f.String(s.Flag, "", fmt.Sprintf("%s (env %s)", s.Usage, s.Env))
			c.settings = append(c.settings, s)
		}
	}
	return c
}

// load reads the configuration: defaults < file < AGENTQ_* < flags.
func (c *common) load(cmd *cobra.Command) (config.Config, error) {
	in := config.Input{Path: c.config, LookupEnv: c.env.lookup, Flags: map[string]string{}, WithoutProviderKeys: !c.providerKeys}
	if in.Path == "" {
		if p, ok := c.env.lookup("AGENTQ_CONFIG"); ok && p != "" {
			in.Path = p
		} else {
			in.Path, in.Optional = "agentq.yaml", true
		}
	}
	for _, s := range c.settings {
		if fl := cmd.Flags().Lookup(s.Flag); fl != nil && fl.Changed {
			in.Flags[s.Key] = fl.Value.String()
		}
	}
	cfg, err := config.Load(in)
	if err != nil {
		return cfg, &ExitError{Code: ExitUsage, Err: err}
	}
	c.loaded = cfg
	if log, err := c.logger(cmd); err == nil {
		useLoggerForRedis(log)
	}
	return cfg, nil
}

// sayWhichRedis prints one line on stderr when no configuration file was
// read, so a command never writes to a Redis the user did not choose
// without saying so.
func (c *common) sayWhichRedis(cmd *cobra.Command, cfg config.Config) {
	if cfg.File == "" {
		fmt.Fprintf(cmd.ErrOrStderr(), "%s: no configuration file (no --config, no agentq.yaml here): using Redis at %s\n", cmd.Root().Name(), cfg.Redis.Where())
	}
}

// logger returns the env's logger or a JSON logger on stderr at --log-level.
func (c *common) logger(cmd *cobra.Command) (*slog.Logger, error) {
	if c.env.Logger != nil {
		return c.env.Logger, nil
	}
	level := c.logLevel
	if !cmd.Flags().Changed("log-level") {
		if v, ok := c.env.lookup("AGENTQ_LOG_LEVEL"); ok && v != "" {
			level = v
		}
	}
	var l slog.Level
	if err := l.UnmarshalText([]byte(strings.ToUpper(level))); err != nil {
		return nil, usageErr("--log-level: %q is not debug, info, warn or error", level)
	}
	// every line is redacted of the configuration's secrets and the
	// dashboard token, whatever a provider or Redis error carried
	tok, _ := c.env.lookup("AGENTQ_DASHBOARD_TOKEN")
	h := slog.NewJSONHandler(c.env.Err, &slog.HandlerOptions{Level: l})
	return slog.New(redact.Handler(h, redact.New(append(c.loaded.Secrets(), tok)...))), nil
}

// forever is what --wait-for-redis means without a value.
const forever = 100 * 365 * 24 * time.Hour

// addWaitForRedis registers --wait-for-redis: without it a command that
// cannot reach Redis at start exits 3 at once; with it the command keeps
// trying with backoff (alone: until Redis answers or the process is
// stopped; with a duration: for that long, then exit 3).
func addWaitForRedis(cmd *cobra.Command, d *time.Duration) {
	cmd.Flags().DurationVar(d, "wait-for-redis", 0, "keep trying to reach Redis at start, with backoff: alone until it answers, or =DURATION for that long (--wait-for-redis=2m); without it, exit 3 at once")
	cmd.Flags().Lookup("wait-for-redis").NoOptDefVal = forever.String()
}
