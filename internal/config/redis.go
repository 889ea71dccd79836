package config

import (
	"fmt"

	"github.com/redis/go-redis/v9"
)

// Options returns go-redis options for the configured server. A URL wins
// over Addr; rediss:// turns TLS on.
func (r Redis) Options() (*redis.Options, error) {
	if r.URL != "" {
		o, err := redis.ParseURL(r.URL)
		if err != nil {
			return nil, fmt.Errorf("redis.url %q: %w", redactURL(r.URL), err)
		}
		if r.Password != "" {
			o.Password = r.Password.Reveal()
		}
		if r.Username != "" {
			o.Username = r.Username
		}
		o.DialTimeout = r.DialTimeout.D()
		return o, nil
	}
	return &redis.Options{
		Addr:        r.Addr,
		Username:    r.Username,
		Password:    r.Password.Reveal(),
		DB:          r.DB,
		DialTimeout: r.DialTimeout.D(),
	}, nil
}

// Where names the server for messages, without credentials.
func (r Redis) Where() string {
	if r.URL != "" {
		return redactURL(r.URL)
	}
	return r.Addr
}
