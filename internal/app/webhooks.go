package app

import (
	"github.com/agentq/agentq/internal/config"
	"github.com/agentq/agentq/internal/flow"
	"github.com/agentq/agentq/internal/spec"
)

// Webhooks is the configuration's webhooks: block as the step handler and
// the producer client take it (never the secret): nil when there is no
// secret, so no workflow is notified and a spec with notify: is refused;
// webhooks.url, when set, is the default notify.
func Webhooks(cfg config.Config) *flow.Webhooks {
	c := cfg.Webhooks
	if !c.Enabled() {
		return nil
	}
	w := &flow.Webhooks{}
	if c.URL != "" {
		w.Default = &spec.NotifySpec{URL: c.URL, Events: c.Events}
	}
	return w
}
