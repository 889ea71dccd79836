package llmclient

import (
	"crypto/tls"
	"crypto/x509"
	"net"
	"net/http"
	"sync"
	"time"
)

// idleConnsPerHost is how many idle connections to one provider an
// adapter built without a transport keeps for its next calls: a worker's
// concurrency worth, so its calls reuse their connections instead of
// dialing (and, against a real provider, shaking hands over TLS) again.
const idleConnsPerHost = 256

// goDefaultTransport is net/http's own http.DefaultTransport, as it was
// when this package was loaded.
var goDefaultTransport = http.DefaultTransport

// pooledTransport is a copy of http.DefaultTransport (proxy from the
// environment, dial, TLS and idle timeouts, HTTP/2, and whatever the
// program set on it before the first adapter was built) with an idle pool
// sized for a worker: http.DefaultTransport keeps 2 idle connections per
// host, so of 50 concurrent calls to one provider 48 would dial again the
// next time. One, shared, so that adapters of one host share their pool.
var pooledTransport = sync.OnceValue(func() http.RoundTripper {
	t, ok := goDefaultTransport.(*http.Transport)
	if !ok {
		return goDefaultTransport
	}
	t = t.Clone()
	t.MaxIdleConnsPerHost = idleConnsPerHost
	t.MaxIdleConns = 4 * idleConnsPerHost
	return t
})

// defaultTransport is the transport of an adapter built without one
// (Options.Transport nil): the pooled copy of http.DefaultTransport, or
// the transport the program put in http.DefaultTransport's place (a
// tracing or proxying one), used as it is.
func defaultTransport() http.RoundTripper {
	if http.DefaultTransport != goDefaultTransport {
		return http.DefaultTransport
	}
	return pooledTransport()
}

// rootedTransport is the pooled transport's copy (its idle pool and
// HTTP/2 as they are) that checks servers against roots: a connection
// pool of its own.
func rootedTransport(roots *x509.CertPool) http.RoundTripper {
	base, ok := pooledTransport().(*http.Transport)
	if !ok { // the program's transport in http.DefaultTransport's place before the first adapter
		d := &net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}
		base = &http.Transport{Proxy: http.ProxyFromEnvironment, DialContext: d.DialContext, ForceAttemptHTTP2: true,
			MaxIdleConnsPerHost: idleConnsPerHost, MaxIdleConns: 4 * idleConnsPerHost,
			IdleConnTimeout: 90 * time.Second, TLSHandshakeTimeout: 10 * time.Second, ExpectContinueTimeout: time.Second}
	}
	t := base.Clone()
	t.TLSClientConfig = &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}
	return t
}

// transport is the adapter's transport as Options say.
func (o Options) transport() http.RoundTripper {
	switch {
	case o.Transport != nil:
		return o.Transport
	case o.RootCAs != nil:
		return rootedTransport(o.RootCAs)
	}
	return defaultTransport()
}
