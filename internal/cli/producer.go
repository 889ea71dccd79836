package cli

import (
	"errors"

	"github.com/spf13/cobra"

	"github.com/agentq/agentq"
	"github.com/agentq/agentq/internal/config"
	"github.com/agentq/agentq/internal/sdkconfig"
)

// serverURL is --server, else AGENTQ_SERVER; empty: talk to Redis.
func (c *common) serverURL(cmd *cobra.Command) string {
	if fl := cmd.Flags().Lookup("server"); fl != nil && fl.Value.String() != "" {
		return fl.Value.String()
	}
	v, _ := c.env.lookup("AGENTQ_SERVER")
	return v
}

// sdkConfig is cfg as the SDK's Config.
func sdkConfig(cfg config.Config) (agentq.Config, error) {
	if sdkconfig.Of != nil {
		if acfg, ok := sdkconfig.Of(cfg).(agentq.Config); ok {
			return acfg, nil
		}
	}
	return agentq.Config{}, errors.New("the SDK's configuration is not set up (package agentq not loaded)")
}

// openProducer opens the SDK's client (agentq.Client, what any program
// uses), over the dashboard's API (--server) or over Redis.
func (c *common) openProducer(cmd *cobra.Command, cfg config.Config) (*agentq.Client, error) {
	acfg, err := sdkConfig(cfg)
	if err != nil {
		return nil, err
	}
	if u := c.serverURL(cmd); u != "" {
		token, _ := c.env.lookup("AGENTQ_DASHBOARD_TOKEN")
		return agentq.NewServerClientWithConfig(acfg, u, token), nil
	}
	c.sayWhichRedis(cmd, cfg)
	return agentq.NewClient(cmd.Context(), acfg)
}

// withClient loads the configuration, opens the SDK's client, runs f,
// closes.
func withClient(cmd *cobra.Command, c *common, f func(*agentq.Client) error) error {
	cfg, err := c.load(cmd)
	if err != nil {
		return err
	}
	p, err := c.openProducer(cmd, cfg)
	if err != nil {
		return err
	}
	defer p.Close()
	return f(p)
}
