package router

// The auth probe: some providers and proxies hide a rejected key behind a
// 500 with an empty body.

import (
	"context"
	"strings"

	"github.com/agentq/agentq/llmclient"

	"github.com/agentq/agentq/retry"
)

// probeEmpty500 asks the provider, for a 500 with an empty body, whether
// the key is rejected: some providers and proxies hide auth failures so.
func (r *Router) probeEmpty500(ctx context.Context, t Target, err error) error {
	e, ok := llmclient.AsError(err)
	p, canProbe := t.Provider.(llmclient.Prober)
	if !ok || !canProbe || e.Status != 500 || strings.TrimSpace(e.Body) != "" {
		return err
	}
	perr := p.Probe(ctx)
	r.log.Info("auth probe after an empty 500", "provider", t.Provider.Name(), "key", e.Key, "probe_class", string(retry.ClassOf(perr)))
	if retry.ClassOf(perr) == retry.Auth {
		return &AuthProbeError{Err: err}
	}
	return err
}
