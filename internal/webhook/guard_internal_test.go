package webhook

import (
	"net/netip"
	"strings"
	"testing"
)

// Which dialed addresses pass: public ones always; a special one only when
// its host (or the address) is listed exactly, never through a wildcard,
// so a name under an allowed suffix cannot be pointed at the metadata
// service or the LAN.
func TestCheckAddr(t *testing.T) {
	g, err := NewGuard([]string{"*.example.com", "hooks.internal", "10.1.2.3"})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		host, ip string
		want     string // "" allowed, else a word of the refusal
	}{
		{"a.example.com", "93.184.216.34", ""},
		{"a.example.com", "169.254.169.254", "link-local"},
		{"a.example.com", "10.0.0.1", "private"},
		{"a.example.com", "::ffff:127.0.0.1", "loopback"},
		{"a.example.com", "fd00::1", "private"},
		{"a.example.com", "0.0.0.0", "unspecified"},
		{"a.example.com", "224.0.0.1", "multicast"},
		{"a.example.com", "100.64.0.1", "reserved"},
		{"a.example.com", "255.255.255.255", "reserved"},
		// IPv6 addresses that carry a refused IPv4 address
		{"a.example.com", "64:ff9b::7f00:1", "loopback (127.0.0.1 inside NAT64)"},
		{"a.example.com", "64:ff9b::a9fe:a9fe", "link-local (169.254.169.254 inside NAT64)"},
		{"a.example.com", "2002:a00:1::1", "private (10.0.0.1 inside 6to4)"},
		{"a.example.com", "2002:7f00:1::", "loopback"},
		{"a.example.com", "::10.0.0.1", "private (10.0.0.1 inside IPv4-compatible)"},
		{"a.example.com", "::169.254.169.254", "link-local"},
		{"a.example.com", "2001:0:4136:e378:8000:63bf:80ff:fffe", "loopback (127.0.0.1 inside Teredo)"},
		{"a.example.com", "64:ff9b:1::a00:1", "reserved"},
		// and pass when the IPv4 address inside is public
		{"a.example.com", "64:ff9b::5db8:d822", ""},
		{"a.example.com", "2002:5db8:d822::1", ""},
		{"a.example.com", "2606:4700::1111", ""},
		{"hooks.internal", "10.0.0.1", ""},
		{"other.internal", "10.1.2.3", ""},
	} {
		err := g.checkAddr(c.host, netip.MustParseAddr(c.ip))
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s at %s: %v, want allowed", c.host, c.ip, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s at %s: %v, want a refusal saying %q", c.host, c.ip, err, c.want)
		}
	}
}
