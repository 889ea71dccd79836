package agentq

import (
	"github.com/agentq/agentq/internal/config"
	"github.com/agentq/agentq/internal/sdkconfig"
)

func init() {
	// the enqueue command loads its configuration with its own flags,
	// then reaches workflows through a Client like any program
	sdkconfig.Of = func(cfg config.Config) any { return Config{c: &cfg} }
}
