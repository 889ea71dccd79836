package llmclient

import "net/http"

// idleConnsPerHost is how many idle connections to one provider an
// adapter built without a transport keeps for its next calls: a worker's
// concurrency worth, so its calls reuse their connections instead of
// dialing (and, against a real provider, shaking hands over TLS) again.
const idleConnsPerHost = 256

// defaultTransport is the transport of every adapter built without one
// (Options.Transport nil), shared so that adapters of one host share their
// pool: http.DefaultTransport's settings (proxy from the environment,
// dial, TLS and idle timeouts, HTTP/2) with an idle pool sized for a
// worker. http.DefaultTransport itself keeps 2 idle connections per host,
// so of 50 concurrent calls to one provider 48 dial again the next time.
var defaultTransport = newDefaultTransport()

func newDefaultTransport() http.RoundTripper {
	t, ok := http.DefaultTransport.(*http.Transport)
	if !ok { // replaced by the program: its choice
		return http.DefaultTransport
	}
	t = t.Clone()
	t.MaxIdleConnsPerHost = idleConnsPerHost
	t.MaxIdleConns = 4 * idleConnsPerHost
	return t
}
