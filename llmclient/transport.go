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
// adapter built without a transport keeps for its next calls, at least:
// Options.IdleConnsPerHost raises it to the calls a program makes at once
// (a worker's concurrency), so that its calls reuse their connections
// instead of dialing (and, against a real provider, shaking hands over
// TLS) again.
const idleConnsPerHost = 256

// maxIdleConnsPerHost bounds the pool: 65,536 idle connections to one
// host (262,144 in all) is past what one process's file descriptors
// allow anyway, and four times it still fits an int.
const maxIdleConnsPerHost = 1 << 16

// connReadBuffer and connWriteBuffer size the buffers an HTTP/1.1
// connection keeps for its whole life, idle in the pool too (net/http's
// default: 4 KiB each; HTTP/2 has its own, one set per connection). A
// worker keeps a connection per slot, so at 10,000 slots the defaults
// held 80 MiB. A call's request is written and its answer read once: a
// smaller buffer costs a body longer than it one more write (the rest
// goes to the socket straight from the body) and answers are read in the
// JSON decoder's growing chunks either way; header lines longer than the
// buffer are read whole all the same, and streamed answers are split
// into lines by the SDKs' own readers. One limit does follow the read
// buffer: a chunked answer's size line (its extensions included) longer
// than it is refused (4 KiB before; no provider sends extensions). Sizes
// the program set on http.DefaultTransport are kept.
const connReadBuffer, connWriteBuffer = 1 << 10, 1 << 10

// goDefaultTransport is net/http's own http.DefaultTransport, as it was
// when this package was loaded.
var goDefaultTransport = http.DefaultTransport

// pooled holds the copies of http.DefaultTransport made for adapters
// built without a transport, one per idle pool size: adapters of one
// size share a pool of connections per host.
var pooled struct {
	sync.Mutex
	byIdle map[int]*http.Transport
}

// pooledTransport is a copy of http.DefaultTransport (proxy from the
// environment, dial, TLS and idle timeouts, HTTP/2, and whatever the
// program set on it before the first adapter of its size was built) whose idle pool
// keeps idle connections per host (and four times that in all):
// http.DefaultTransport keeps 2 per host, so of 50 concurrent calls to one
// provider 48 would dial again the next time. Its connections keep
// smaller buffers (connReadBuffer) unless the program sized them. One per
// size, shared; nil when http.DefaultTransport is not an *http.Transport.
func pooledTransport(idle int) *http.Transport {
	base, ok := goDefaultTransport.(*http.Transport)
	if !ok {
		return nil
	}
	pooled.Lock()
	defer pooled.Unlock()
	if t := pooled.byIdle[idle]; t != nil {
		return t
	}
	t := base.Clone()
	t.MaxIdleConnsPerHost = idle
	t.MaxIdleConns = 4 * idle
	if t.ReadBufferSize == 0 {
		t.ReadBufferSize = connReadBuffer
	}
	if t.WriteBufferSize == 0 {
		t.WriteBufferSize = connWriteBuffer
	}
	if pooled.byIdle == nil {
		pooled.byIdle = map[int]*http.Transport{}
	}
	pooled.byIdle[idle] = t
	return t
}

// defaultTransport is the transport of an adapter built without one
// (Options.Transport nil): the pooled copy of http.DefaultTransport, or
// the transport the program put in http.DefaultTransport's place (a
// tracing or proxying one), used as it is.
func defaultTransport(idle int) http.RoundTripper {
	if http.DefaultTransport != goDefaultTransport {
		return http.DefaultTransport
	}
	if t := pooledTransport(idle); t != nil {
		return t
	}
	return goDefaultTransport
}

// rootedTransport is the pooled transport's copy (its idle pool and
// HTTP/2 as they are) that checks servers against roots: a connection
// pool of its own.
func rootedTransport(roots *x509.CertPool, idle int) http.RoundTripper {
	base := pooledTransport(idle)
	if base == nil { // the program's transport in http.DefaultTransport's place before this package was loaded
		d := &net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}
		base = &http.Transport{Proxy: http.ProxyFromEnvironment, DialContext: d.DialContext, ForceAttemptHTTP2: true,
			MaxIdleConnsPerHost: idle, MaxIdleConns: 4 * idle, ReadBufferSize: connReadBuffer, WriteBufferSize: connWriteBuffer,
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
		return rootedTransport(o.RootCAs, o.idleConns())
	}
	return defaultTransport(o.idleConns())
}

// idleConns is the idle pool per host of an adapter built without a
// transport: IdleConnsPerHost, at least idleConnsPerHost and at most
// maxIdleConnsPerHost.
func (o Options) idleConns() int {
	return min(max(o.IdleConnsPerHost, idleConnsPerHost), maxIdleConnsPerHost)
}
