package config

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/agentq/agentq/llmclient"
	"github.com/redis/go-redis/v9"
)

// validate returns every problem, one error each, naming the field.
func (c *Config) validate() error {
	var errs []error
	bad := func(field, format string, a ...any) {
		errs = append(errs, &FieldError{Field: field, Msg: fmt.Sprintf(format, a...)})
	}
	if len(c.Redis.Cluster) > 0 && c.Redis.Sentinel != nil {
		bad("redis", "cluster and sentinel cannot both be set")
	}
	if sn := c.Redis.Sentinel; sn != nil && (sn.MasterName == "" || len(sn.Addrs) == 0) {
		bad("redis.sentinel", "needs master_name and at least one address")
	}
	if c.Redis.URL != "" {
		u, err := url.Parse(c.Redis.URL)
		if err != nil || (u.Scheme != "redis" && u.Scheme != "rediss") || u.Host == "" {
			bad("redis.url", "%q is not a redis:// or rediss:// URL", redactURL(c.Redis.URL))
		} else if _, err := redis.ParseURL(c.Redis.URL); err != nil {
			// the database, a query option: what the client itself refuses
			bad("redis.url", "%q: %v", redactURL(c.Redis.URL), err)
		}
	} else if c.Redis.Addr == "" {
		bad("redis.addr", "is empty (set redis.addr or redis.url)")
	} else if len(c.Redis.Cluster) == 0 && c.Redis.Sentinel == nil {
		if _, port, err := net.SplitHostPort(c.Redis.Addr); err != nil || port == "" {
			bad("redis.addr", "%q is not host:port (e.g. 127.0.0.1:6379)", c.Redis.Addr)
		}
	}
	for i, a := range c.Redis.Cluster {
		if _, port, err := net.SplitHostPort(a); err != nil || port == "" {
			bad(fmt.Sprintf("redis.cluster[%d]", i), "%q is not host:port", a)
		}
	}
	if sn := c.Redis.Sentinel; sn != nil {
		for i, a := range sn.Addrs {
			if _, port, err := net.SplitHostPort(a); err != nil || port == "" {
				bad(fmt.Sprintf("redis.sentinel.addrs[%d]", i), "%q is not host:port", a)
			}
		}
	}
	if d := c.Redis.Durability; d != nil {
		switch {
		case d.Replicas < 1:
			bad("redis.durability.replicas", "is %d: set at least 1 (the replicas that may be promoted), or leave durability out", d.Replicas)
		case d.Replicas > 100:
			bad("redis.durability.replicas", "is %d: at most 100", d.Replicas)
		}
		if d.Timeout.D() < 0 || d.Timeout.D() > time.Minute {
			bad("redis.durability.timeout", "is %s: between 1ms and 1m (0: 1s)", d.Timeout.D())
		} else if d.Timeout.D() > 0 && d.Timeout.D() < time.Millisecond {
			bad("redis.durability.timeout", "is %s: WAIT counts whole milliseconds; at least 1ms", d.Timeout.D())
		}
	}
	if t := c.Redis.TLS; t != nil {
		if (t.CertFile == "") != (t.KeyFile == "") {
			bad("redis.tls", "cert_file and key_file go together")
		}
		if _, err := t.Config(); err != nil {
			bad("redis.tls", "%v", err)
		}
	}
	seen := map[string]bool{}
	for i, p := range c.Providers {
		f := fmt.Sprintf("providers[%d]", i)
		switch {
		case p.Name == "":
			bad(f+".name", "is empty")
		case seen[p.Name]:
			bad(f+".name", "%q is used by another provider", p.Name)
		case strings.ContainsAny(p.Name, "{}: \t/"):
			bad(f+".name", "%q may not contain spaces, braces, colons or slashes", p.Name)
		}
		seen[p.Name] = true
		dialects := llmclient.Dialects()
		kinds := make([]string, len(dialects))
		for i, d := range dialects {
			kinds[i] = d.Kind
		}
		d := slices.IndexFunc(dialects, func(d llmclient.Dialect) bool { return d.Kind == p.Kind })
		switch {
		case p.Kind == "":
			bad(f+".kind", "is empty (want one of %s)", strings.Join(kinds, ", "))
		case d < 0:
			bad(f+".kind", "%q is not one of %s", p.Kind, strings.Join(kinds, ", "))
		}
		if p.BaseURL != "" {
			if u, err := url.Parse(p.BaseURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
				bad(f+".base_url", "%q is not an http(s) URL", p.BaseURL)
			}
		}
		if p.CAFile != "" {
			if _, err := p.RootCAs(); err != nil {
				bad(f+".ca_file", "%v", strings.TrimPrefix(err.Error(), "ca_file: "))
			}
		}
		if len(p.Keys) == 0 && d >= 0 && dialects[d].NeedsKey {
			bad(f+".keys", "is empty (%s needs at least one key)", p.Kind)
		}
		for j, k := range p.Keys {
			if k == "" {
				bad(fmt.Sprintf("%s.keys[%d]", f, j), "is empty")
			}
		}
		if p.MaxConcurrency < 0 {
			bad(f+".max_concurrency", "is negative")
		}
		if p.RPM < 0 {
			bad(f+".rpm", "is negative")
		}
		if p.Timeout.D() < time.Second {
			bad(f+".timeout", "%s is under 1s", p.Timeout)
		}
		if p.MaxResponseBytes != 0 && p.MaxResponseBytes < 64<<10 {
			bad(f+".max_response_bytes", "%d is under 65536 (0 means 2 MiB)", p.MaxResponseBytes)
		}
	}
	for _, name := range c.RouteNames() {
		r := c.Routes[name]
		f := "routes." + name
		if len(r.Targets) == 0 {
			bad(f+".targets", "is empty")
		}
		check := func(field string, t Target) {
			if t.Provider == "" {
				bad(field+".provider", "is empty")
			} else if _, ok := c.Provider(t.Provider); !ok {
				bad(field+".provider", "unknown provider %q", t.Provider)
			}
			if t.Model == "" {
				bad(field+".model", "is empty")
			}
			if t.MaxInputBytes < 0 {
				bad(field+".max_input_bytes", "is negative")
			}
		}
		for i, t := range r.Targets {
			check(fmt.Sprintf("%s.targets[%d]", f, i), t)
		}
		if r.ContextWindowFallback != nil {
			check(f+".context_window_fallback", *r.ContextWindowFallback)
		}
		if r.ContentFallback != nil {
			check(f+".content_fallback", *r.ContentFallback)
		}
		switch r.Strategy {
		case "health", "ordered":
		default:
			bad(f+".strategy", "%q is not health or ordered", r.Strategy)
		}
		if _, _, err := r.Hedge(); err != nil {
			bad(f+".hedge_after", "%v", err)
		}
	}
	rt := c.Resilience.Retry
	if len(rt.Jitter) != 2 {
		bad("resilience.retry.jitter", "%v is not [low, high]", rt.Jitter)
	} else if err := rt.Backoff().Validate(); err != nil {
		bad("resilience.retry", "%v", err)
	}
	if rt.MaxRetries == nil || *rt.MaxRetries < 0 {
		bad("resilience.retry.max_retries", "must be 0 or more")
	}
	if k := c.Resilience.Keys; k.DefaultCooldown > k.MaxCooldown {
		bad("resilience.keys.default_cooldown", "%s is over max_cooldown %s", k.DefaultCooldown, k.MaxCooldown)
	}
	if err := c.Resilience.Breaker.Config(time.Minute).Validate(); err != nil {
		bad("resilience.breaker", "%v", err)
	}
	w := c.Resilience.Health.Weights
	if s := w.Success + w.Latency + w.Trend; s < 0.999 || s > 1.001 || w.Success < 0 || w.Latency < 0 || w.Trend < 0 {
		bad("resilience.health.weights", "must be non-negative and sum to 1 (they sum to %v)", s)
	}
	if c.Resilience.Health.Window.D() <= 0 {
		bad("resilience.health.window", "must be positive")
	}
	for f, d := range map[string]Duration{"worker.poll_interval": c.Worker.PollInterval, "worker.retry_poll_interval": c.Worker.RetryPollInterval} {
		if d.D() < 10*time.Millisecond || d.D() > time.Minute {
			bad(f, "%s is not between 10ms and 1m", d)
		}
	}
	if l := c.Worker.KeyLease.D(); l < 3*time.Second || l > 10*time.Minute {
		bad("worker.key_lease", "%s is not between 3s and 10m", l)
	}
	if c.Worker.Profiling && c.Worker.MetricsAddr == "" {
		bad("worker.profiling", "needs worker.metrics_addr (the profiles are served there)")
	}
	if c.Worker.Concurrency < 1 {
		bad("worker.concurrency", "%d is under 1", c.Worker.Concurrency)
	}
	c.validateQueues(bad)
	if c.Retention.D() < time.Minute {
		bad("retention", "%s is under 1m", c.Retention)
	}
	for t, p := range c.Prices {
		if p.Prompt < 0 || p.Completion < 0 || !strings.Contains(t, "/") {
			bad("prices."+t, "want provider/model with prices of 0 or more")
		}
	}
	if c.Limits.MaxSteps < 1 || c.Limits.MaxSpecBytes < 1 || c.Limits.MaxOutputBytes < 1 {
		bad("limits", "max_steps, max_spec_bytes and max_output_bytes must be positive")
	}
	if c.Limits.MaxTurns < 1 || c.Limits.MaxTurns > 100 {
		bad("limits.max_turns", "%d is not between 1 and 100", c.Limits.MaxTurns)
	}
	if c.Events.Limit < 100 || c.Events.Limit > 1000000 {
		bad("events.limit", "%d is not between 100 and 1,000,000", c.Events.Limit)
	}
	if k := c.Signals.Keep.D(); k < time.Second || k > c.Retention.D() {
		bad("signals.keep", "%s is not between 1s and the retention (%s)", k, c.Retention.D())
	}
	if c.Limits.MaxMapItems < 1 || c.Limits.MaxMapItems > 100000 {
		bad("limits.max_map_items", "%d is not between 1 and 100,000", c.Limits.MaxMapItems)
	}
	if w := c.Limits.MaxWait.D(); w < time.Second {
		bad("limits.max_wait", "%s is under 1s", w)
	}
	if a := c.Limits.MaxOpenAge.D(); a < c.Limits.MaxWait.D() {
		bad("limits.max_open_age", "%s is under limits.max_wait (%s): a wait could outlive its workflow", a, c.Limits.MaxWait.D())
	}
	if n := c.Limits.MaxTreeWorkflows; n < 1 || n > 1000000 {
		bad("limits.max_tree_workflows", "%d is not between 1 and 1,000,000", n)
	}
	if n := c.Limits.MaxKeptSignals; n < 1 || n > 1000000 {
		bad("limits.max_kept_signals", "%d is not between 1 and 1,000,000", n)
	}
	if n := c.Limits.MaxSignalBytes; n < 1 || n > c.Limits.MaxOutputBytes {
		bad("limits.max_signal_bytes", "%d is not between 1 and limits.max_output_bytes (%d)", n, c.Limits.MaxOutputBytes)
	}
	if n := c.Dashboard.MaxStreams; n < 1 {
		bad("dashboard.max_streams", "%d is under 1", n)
	}
	if n := c.Dashboard.MaxStreamsPerClient; n < 1 || n > c.Dashboard.MaxStreams {
		bad("dashboard.max_streams_per_client", "%d is not between 1 and dashboard.max_streams (%d)", n, c.Dashboard.MaxStreams)
	}
	errs = append(errs, c.Webhooks.validate()...)
	errs = append(errs, c.validateSchedules()...)
	errs = append(errs, c.validateBudgets()...)
	errs = append(errs, c.validateMCPServers()...)
	return errors.Join(errs...)
}
