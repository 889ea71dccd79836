package client

import (
	"github.com/agentq/agentq/internal/app"
	"github.com/agentq/agentq/internal/config"
	"github.com/agentq/agentq/internal/spec"
)

// ParseSpec reads and checks a workflow spec against cfg (its routes, its
// limits, its webhooks) without connecting to anything: bad input never
// reaches Redis. schemaDir is where output.schema paths are relative to
// ("": the working directory).
func ParseSpec(cfg config.Config, source string, data []byte, schemaDir string) (*spec.Spec, error) {
	o := app.ClientOptions(cfg)
	lim := o.Limits
	lim.SchemaDir = schemaDir
	var routes map[string]bool
	if o.Routes != nil {
		routes = make(map[string]bool, len(o.Routes))
		for _, r := range o.Routes {
			routes[r] = true
		}
	}
	wspec, err := spec.ParseSpec(source, data, routes, lim)
	if err != nil {
		return nil, err
	}
	if err := app.Webhooks(cfg).Check(source, wspec); err != nil {
		return nil, err
	}
	return wspec, nil
}

// Parse is ParseSpec with the client's configuration. A Remote client
// leaves the webhooks to the server (which checks every spec again
// against its own configuration).
func (c *Client) Parse(source string, data []byte) (*spec.Spec, error) {
	if c.remote {
		return spec.ParseSpec(source, data, nil, app.ClientOptions(c.cfg).Limits)
	}
	return ParseSpec(c.cfg, source, data, "")
}
