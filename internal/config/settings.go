package config

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// Setting is a scalar field that an AGENTQ_* variable or a flag can set.
// Lists (providers, routes) come only from the file.
type Setting struct {
	Key   string // field path, e.g. "worker.concurrency"
	Env   string // e.g. "AGENTQ_CONCURRENCY"
	Flag  string // e.g. "concurrency"
	Usage string
	set   func(*Config, string) error
}

// Settings lists every field settable from the environment or a flag.
func Settings() []Setting {
	return []Setting{
		{"redis.addr", "AGENTQ_REDIS_ADDR", "redis-addr", "Redis host:port", func(c *Config, v string) error { c.Redis.Addr = v; return nil }},
		{"redis.url", "AGENTQ_REDIS_URL", "redis-url", "Redis URL (redis:// or rediss://), wins over --redis-addr", func(c *Config, v string) error { c.Redis.URL = v; return nil }},
		{"redis.username", "AGENTQ_REDIS_USERNAME", "redis-username", "Redis ACL user name", func(c *Config, v string) error { c.Redis.Username = v; return nil }},
		{"redis.password", "AGENTQ_REDIS_PASSWORD", "redis-password", "Redis password (prefer the variable to the flag)", func(c *Config, v string) error { c.Redis.Password = Secret(v); return nil }},
		{"redis.db", "AGENTQ_REDIS_DB", "redis-db", "Redis database number", func(c *Config, v string) error { return setInt(&c.Redis.DB, v, 0) }},
		{"retention", "AGENTQ_RETENTION", "retention", "how long workflow records and results are kept", func(c *Config, v string) error { return setDuration(&c.Retention, v) }},
		{"worker.concurrency", "AGENTQ_CONCURRENCY", "concurrency", "steps run at once by this worker", func(c *Config, v string) error { return setInt(&c.Worker.Concurrency, v, 1) }},
		{"worker.queues", "AGENTQ_QUEUES", "queues", "queues and priorities, e.g. critical=6,default=3,low=1", func(c *Config, v string) error {
			q, err := ParseQueues(v)
			if err == nil {
				c.Worker.Queues = q
			}
			return err
		}},
		{"worker.metrics_addr", "AGENTQ_METRICS_ADDR", "metrics-addr", "serve /metrics, /livez and /readyz here, e.g. :9091 (empty: off)", func(c *Config, v string) error { c.Worker.MetricsAddr = v; return nil }},
		{"worker.shutdown_timeout", "AGENTQ_SHUTDOWN_TIMEOUT", "shutdown-timeout", "how long running steps may finish after SIGTERM", func(c *Config, v string) error { return setDuration(&c.Worker.ShutdownTimeout, v) }},
		{"resilience.retry.max_retries", "AGENTQ_MAX_RETRIES", "max-retries", "default retries of a step before it is dead-lettered", func(c *Config, v string) error {
			n := 0
			if err := setInt(&n, v, 0); err != nil {
				return err
			}
			c.Resilience.Retry.MaxRetries = &n
			return nil
		}},
	}
}

// ParseQueues reads "critical=6,default=3,low=1".
func ParseQueues(s string) (map[string]int, error) {
	out := map[string]int{}
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		name, prio, ok := strings.Cut(part, "=")
		if !ok {
			prio = "1"
		}
		n, err := strconv.Atoi(prio)
		if err != nil || n < 1 || name == "" {
			return nil, fmt.Errorf("%q is not name=priority with a priority of 1 or more", part)
		}
		out[name] = n
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no queues in %q", s)
	}
	return out, nil
}

// FormatQueues writes queues as ParseQueues reads them, highest priority first.
func FormatQueues(q map[string]int) string {
	names := make([]string, 0, len(q))
	for n := range q {
		names = append(names, n)
	}
	sort.Slice(names, func(i, j int) bool {
		if q[names[i]] != q[names[j]] {
			return q[names[i]] > q[names[j]]
		}
		return names[i] < names[j]
	})
	parts := make([]string, len(names))
	for i, n := range names {
		parts[i] = fmt.Sprintf("%s=%d", n, q[n])
	}
	return strings.Join(parts, ",")
}

func setInt(dst *int, v string, min int) error {
	n, err := strconv.Atoi(strings.TrimSpace(v))
	if err != nil {
		return fmt.Errorf("%q is not a whole number", v)
	}
	if n < min {
		return fmt.Errorf("%d is under %d", n, min)
	}
	*dst = n
	return nil
}

func setDuration(dst *Duration, v string) error {
	d, err := parseDuration(strings.TrimSpace(v))
	if err != nil {
		return err
	}
	*dst = Duration(d)
	return nil
}
