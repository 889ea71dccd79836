// Package sdkconfig carries a configuration the enqueue command loaded
// itself (its flags over AGENTQ_* over its file, without provider keys)
// to the SDK's agentq.Config, whose field is unexported, so that the
// command reaches workflows through agentq.Client as any program does.
// Package agentq sets Of when it is loaded, so any package that imports
// agentq finds it set.
package sdkconfig

import "github.com/agentq/agentq/internal/config"

// Of is cfg as an agentq.Config (returned as any: this package cannot
// name the SDK's type).
var Of func(cfg config.Config) any
