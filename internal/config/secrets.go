package config

import "net/url"

// Secrets returns every secret value the configuration holds (provider
// keys, Redis and Sentinel passwords, a password inside the Redis URL, the
// webhook signing secret, the MCP servers' env and headers), for a
// redactor that keeps them out of logs, Redis and pages.
func (c Config) Secrets() []string {
	var out []string
	add := func(s Secret) {
		if s != "" {
			out = append(out, s.Reveal())
		}
	}
	for _, p := range c.Providers {
		for _, k := range p.Keys {
			add(k)
		}
	}
	add(c.Redis.Password)
	add(c.Webhooks.Secret)
	if c.Redis.Sentinel != nil {
		add(c.Redis.Sentinel.Password)
	}
	if u, err := url.Parse(c.Redis.URL); err == nil && u.User != nil {
		if pw, ok := u.User.Password(); ok {
			add(Secret(pw))
		}
	}
	return append(out, c.mcpSecrets()...)
}
