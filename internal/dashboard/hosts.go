package dashboard

import (
	"fmt"
	"net"
	"strings"
)

// hostCheck decides which Host headers name this dashboard. A page on
// another name whose DNS answer was switched to the dashboard's address
// (DNS rebinding) sends its own name as Host, so refusing unknown names
// keeps such a page away from a dashboard without a token.
type hostCheck struct {
	anyHost  bool            // all interfaces, a token, no allowed hosts: the token guards
	port     string          // the listen port; "" when the address is not known
	listen   string          // the listen host when it names one host (lower case, no brackets)
	loopback bool            // localhost, 127.0.0.1 and [::1] name the dashboard
	anyIP    bool            // any IP literal names it (all interfaces)
	names    map[string]bool // allowed hosts without a port: any port
	exact    map[string]bool // allowed hosts with a port (host:port)
}

// newHostCheck reads the listen address and the allowed hosts ("name" for
// any port, "name:port", IPv6 in brackets).
//
//   - the listen address itself is allowed (an empty address counts as
//     loopback on an unknown port: any port);
//   - listening on loopback or on all interfaces, localhost, 127.0.0.1 and
//     [::1] with the listen port are allowed;
//   - listening on all interfaces, any IP address with the listen port is
//     allowed (DNS rebinding always comes with a name), and with a token
//     and no allowed hosts any Host is.
func newHostCheck(addr string, allowed []string, token bool) (hostCheck, error) {
	h := hostCheck{names: map[string]bool{}, exact: map[string]bool{}}
	for _, a := range allowed {
		a = strings.ToLower(strings.TrimSpace(a))
		if a == "" {
			continue
		}
		if strings.ContainsAny(a, "/\\@ ") || strings.Contains(a, "*") {
			return h, fmt.Errorf("allowed host %q: want a host name or host:port", a)
		}
		if name, port, err := net.SplitHostPort(a); err == nil && name != "" && port != "" {
			h.exact[net.JoinHostPort(name, port)] = true
			continue
		}
		h.names[strings.TrimSuffix(strings.TrimPrefix(a, "["), "]")] = true
	}
	if addr == "" {
		h.loopback = true
		return h, nil
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return h, fmt.Errorf("listen address %q: %w", addr, err)
	}
	h.port, host = port, strings.ToLower(host)
	ip := net.ParseIP(host)
	switch {
	case host == "" || ip != nil && ip.IsUnspecified():
		h.loopback, h.anyIP = true, true
		h.anyHost = token && len(h.names)+len(h.exact) == 0
	case host == "localhost" || ip != nil && ip.IsLoopback():
		h.loopback, h.listen = true, host
	default:
		h.listen = host
	}
	return h, nil
}

// allow reports whether hostHeader (r.Host) names this dashboard. A Host
// without a port means the scheme's default port.
func (h hostCheck) allow(hostHeader string, tls bool) bool {
	if h.anyHost {
		return true
	}
	name, port, err := net.SplitHostPort(hostHeader)
	if err != nil {
		name, port = strings.TrimSuffix(strings.TrimPrefix(hostHeader, "["), "]"), "80"
		if tls {
			port = "443"
		}
	}
	name = strings.ToLower(name)
	switch {
	case name == "" || port == "":
		return false
	case h.names[name] || h.exact[net.JoinHostPort(name, port)]:
		return true
	case h.port != "" && port != h.port:
		return false
	case name == h.listen:
		return true
	case h.loopback && (name == "localhost" || name == "127.0.0.1" || name == "::1"):
		return true
	}
	return h.anyIP && net.ParseIP(name) != nil
}
