package webhook

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"syscall"
	"time"

	"github.com/agentq/agentq/internal/hookcheck"
)

// Guard decides which hosts a webhook may reach (the SSRF guard). With an
// allow list, a URL's host must be on it: an exact host name or IP, or
// "*.suffix" for any name under suffix. Whatever the list, an address that
// is loopback, private (RFC 1918, ULA), link-local, unspecified, multicast
// or otherwise reserved is refused unless the host was listed exactly
// (a wildcard never opens one). Addresses are checked when they are dialed,
// after resolution, so a name that resolves to a public address when it is
// checked and to a private one when it is dialed (DNS rebinding) is still
// refused.
type Guard struct {
	exact    map[string]bool
	suffixes []string // ".example.com"
}

// RefusedError is a destination the guard refused: retrying cannot help
// until the configuration changes.
type RefusedError struct {
	Host   string
	Reason string
}

func (e *RefusedError) Error() string { return "webhook to " + e.Host + " refused: " + e.Reason }

// NewGuard returns a guard for the allow list (webhooks.allow); an entry
// that is not a host name, an IP or "*.suffix" is an error naming it.
func NewGuard(allow []string) (*Guard, error) {
	g := &Guard{exact: map[string]bool{}}
	for i, a := range allow {
		e, err := hookcheck.AllowEntry(a)
		if err != nil {
			return nil, fmt.Errorf("allow[%d]: %w", i, err)
		}
		if s, ok := strings.CutPrefix(e, "*"); ok {
			g.suffixes = append(g.suffixes, s)
		} else {
			g.exact[e] = true
		}
	}
	return g, nil
}

// CheckAllow reports an allow entry that is not a host name, an IP or
// "*.suffix" (no scheme, port or path).
func CheckAllow(entry string) error { return hookcheck.CheckAllow(entry) }

// normHost is a host as the allow list holds it.
func normHost(host string) string {
	h := strings.ToLower(strings.TrimSuffix(strings.Trim(host, "[]"), "."))
	if ip, err := netip.ParseAddr(h); err == nil {
		return ip.Unmap().String()
	}
	return h
}

// CheckHost refuses a host the allow list does not name (when there is a
// list).
func (g *Guard) CheckHost(host string) error {
	h := normHost(host)
	if len(g.exact) == 0 && len(g.suffixes) == 0 || g.exact[h] {
		return nil
	}
	for _, s := range g.suffixes {
		if strings.HasSuffix(h, s) {
			return nil
		}
	}
	return &RefusedError{Host: host, Reason: "the host is not in webhooks.allow"}
}

// checkAddr refuses a dialed address of host that is not public, unless
// host (or the address itself) is listed exactly.
func (g *Guard) checkAddr(host string, ip netip.Addr) error {
	ip = ip.Unmap()
	kind := addrKind(ip)
	if kind == "" || g.exact[normHost(host)] || g.exact[ip.String()] {
		return nil
	}
	if normHost(host) == ip.String() {
		return &RefusedError{Host: host, Reason: fmt.Sprintf("%s is a %s address, not listed in webhooks.allow", ip, kind)}
	}
	return &RefusedError{Host: host, Reason: fmt.Sprintf("%s resolves to %s, a %s address, and is not listed exactly in webhooks.allow", host, ip, kind)}
}

// reserved are special-purpose IPv4 and IPv6 ranges netip has no
// predicate for.
var reserved = []netip.Prefix{
	netip.MustParsePrefix("0.0.0.0/8"),      // "this network"
	netip.MustParsePrefix("100.64.0.0/10"),  // shared address space (carrier NAT)
	netip.MustParsePrefix("192.0.0.0/24"),   // IETF protocol assignments
	netip.MustParsePrefix("198.18.0.0/15"),  // benchmarking
	netip.MustParsePrefix("240.0.0.0/4"),    // reserved, and the broadcast address
	netip.MustParsePrefix("fec0::/10"),      // site-local (deprecated)
	netip.MustParsePrefix("64:ff9b:1::/48"), // local-use NAT64: the IPv4 inside depends on the site's prefix length
}

// embedding are the IPv6 ranges that carry an IPv4 address a gateway or
// the host may reach for them, with where its four bytes are (inverted:
// Teredo's client address). A refused IPv4 address stays refused inside
// them.
var embedding = []struct {
	prefix netip.Prefix
	name   string
	at     int
	invert bool
}{
	{netip.MustParsePrefix("64:ff9b::/96"), "NAT64", 12, false},
	{netip.MustParsePrefix("2002::/16"), "6to4", 2, false},
	{netip.MustParsePrefix("2001::/32"), "Teredo", 12, true},
	{netip.MustParsePrefix("::/96"), "IPv4-compatible", 12, false},
}

// embeddedV4 is the IPv4 address an IPv6 address of an embedding range
// carries, with the range's name.
func embeddedV4(ip netip.Addr) (netip.Addr, string, bool) {
	if !ip.Is6() {
		return netip.Addr{}, "", false
	}
	b := ip.As16()
	for _, e := range embedding {
		if !e.prefix.Contains(ip) {
			continue
		}
		var v4 [4]byte
		copy(v4[:], b[e.at:e.at+4])
		if e.invert {
			for i := range v4 {
				v4[i] ^= 0xff
			}
		}
		return netip.AddrFrom4(v4), e.name, true
	}
	return netip.Addr{}, "", false
}

// addrKind names what makes ip not a public address, or "".
func addrKind(ip netip.Addr) string {
	switch {
	case ip.IsLoopback():
		return "loopback"
	case ip.IsPrivate():
		return "private"
	case ip.IsLinkLocalUnicast():
		return "link-local"
	case ip.IsUnspecified():
		return "unspecified"
	case ip.IsMulticast() || ip.IsLinkLocalMulticast() || ip.IsInterfaceLocalMulticast():
		return "multicast"
	}
	for _, p := range reserved {
		if p.Contains(ip) {
			return "reserved"
		}
	}
	if v4, how, ok := embeddedV4(ip); ok {
		if k := addrKind(v4); k != "" {
			return fmt.Sprintf("%s (%s inside %s)", k, v4, how)
		}
	}
	return ""
}

// control is the dialer's check of each address it is about to connect
// to, after resolution.
func (g *Guard) control(host string) func(network, address string, _ syscall.RawConn) error {
	return func(network, address string, _ syscall.RawConn) error {
		ap, err := netip.ParseAddrPort(address)
		if err != nil {
			return &RefusedError{Host: host, Reason: fmt.Sprintf("cannot read the dialed address %q", address)}
		}
		return g.checkAddr(host, ap.Addr())
	}
}

// Client returns an HTTP client that dials only what the guard allows,
// follows no redirect (a 3xx is an answer, not a 2xx), uses no proxy (a
// proxy would dial for it) and gives up after timeout.
func (g *Guard) Client(timeout time.Duration) *http.Client {
	tr := &http.Transport{
		Proxy: nil,
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			host, _, err := net.SplitHostPort(addr)
			if err != nil {
				return nil, err
			}
			if err := g.CheckHost(host); err != nil {
				return nil, err
			}
			d := &net.Dialer{Timeout: timeout, Control: g.control(host)}
			return d.DialContext(ctx, network, addr)
		},
		TLSHandshakeTimeout:   timeout,
		ResponseHeaderTimeout: timeout,
		MaxIdleConns:          16,
		IdleConnTimeout:       90 * time.Second,
		ForceAttemptHTTP2:     true,
	}
	return &http.Client{Transport: tr, Timeout: timeout,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

// refused returns the guard's refusal inside err, if that is what it is.
func refused(err error) (*RefusedError, bool) {
	var re *RefusedError
	return re, errors.As(err, &re)
}
