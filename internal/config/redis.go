package config

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
	"strings"

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
		if r.TLS != nil {
			if o.TLSConfig, err = r.TLS.Config(); err != nil {
				return nil, err
			}
		}
		return o, nil
	}
	o := &redis.Options{
		Addr:        r.Addr,
		Username:    r.Username,
		Password:    r.Password.Reveal(),
		DB:          r.DB,
		DialTimeout: r.DialTimeout.D(),
	}
	if r.TLS != nil {
		var err error
		if o.TLSConfig, err = r.TLS.Config(); err != nil {
			return nil, err
		}
	}
	return o, nil
}

// Config builds the TLS configuration: TLS 1.2 or later, the CA file's
// certificates as roots when given, the client certificate when given.
func (t *RedisTLS) Config() (*tls.Config, error) {
	c := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: t.ServerName}
	if t.CAFile != "" {
		var err error
		if c.RootCAs, err = loadCAs(t.CAFile, x509.NewCertPool()); err != nil {
			return nil, err
		}
	}
	if t.CertFile != "" && t.KeyFile != "" {
		cert, err := tls.LoadX509KeyPair(t.CertFile, t.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("cert_file/key_file: %w", err)
		}
		c.Certificates = []tls.Certificate{cert}
	}
	return c, nil
}

// loadCAs adds the PEM certificates of file to pool.
func loadCAs(file string, pool *x509.CertPool) (*x509.CertPool, error) {
	pem, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("ca_file: %w", err)
	}
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("ca_file: %s holds no PEM certificate", file)
	}
	return pool, nil
}

// RootCAs is the pool the provider's HTTPS endpoint is checked against:
// the system's roots and CAFile's certificates; nil without a CAFile
// (Go's default: the system's).
func (p Provider) RootCAs() (*x509.CertPool, error) {
	if p.CAFile == "" {
		return nil, nil
	}
	pool, err := x509.SystemCertPool()
	if err != nil {
		pool = x509.NewCertPool() // no system roots here: the file's alone
	}
	return loadCAs(p.CAFile, pool)
}

// Universal returns options for a standalone server, a Sentinel-watched
// master or a Cluster, as configured.
func (r Redis) Universal() (*redis.UniversalOptions, error) {
	o, err := r.Options()
	if err != nil {
		return nil, err
	}
	u := &redis.UniversalOptions{Addrs: []string{o.Addr}, Username: o.Username, Password: o.Password, DB: o.DB,
		DialTimeout: o.DialTimeout, TLSConfig: o.TLSConfig}
	switch {
	case len(r.Cluster) > 0:
		u.Addrs, u.DB, u.IsClusterMode = r.Cluster, 0, true
	case r.Sentinel != nil:
		u.Addrs, u.MasterName, u.SentinelPassword = r.Sentinel.Addrs, r.Sentinel.MasterName, r.Sentinel.Password.Reveal()
	}
	return u, nil
}

// Where names the server for messages, without credentials.
func (r Redis) Where() string {
	switch {
	case len(r.Cluster) > 0:
		return "cluster " + strings.Join(r.Cluster, ",")
	case r.Sentinel != nil:
		return "sentinel master " + r.Sentinel.MasterName + " via " + strings.Join(r.Sentinel.Addrs, ",")
	}
	if r.URL != "" {
		return redactURL(r.URL)
	}
	return r.Addr
}
