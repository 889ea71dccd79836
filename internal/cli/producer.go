package cli

import (
	"github.com/spf13/cobra"

	"github.com/agentq/agentq/internal/client"
	"github.com/agentq/agentq/internal/config"
)

// serverURL is --server, else AGENTQ_SERVER; empty: talk to Redis.
func (c *common) serverURL(cmd *cobra.Command) string {
	if fl := cmd.Flags().Lookup("server"); fl != nil && fl.Value.String() != "" {
		return fl.Value.String()
	}
	v, _ := c.env.lookup("AGENTQ_SERVER")
	return v
}

// openProducer opens the producer client every face uses, over the
// dashboard's API (--server) or over Redis.
func (c *common) openProducer(cmd *cobra.Command, cfg config.Config) (*client.Client, error) {
	if u := c.serverURL(cmd); u != "" {
		token, _ := c.env.lookup("AGENTQ_DASHBOARD_TOKEN")
		return client.Remote(cfg, u, token), nil
	}
	c.sayWhichRedis(cmd, cfg)
	return client.Open(cmd.Context(), cfg)
}

// withClient loads the configuration, opens the producer client, runs f,
// closes.
func withClient(cmd *cobra.Command, c *common, f func(*client.Client) error) error {
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
