package hookcheck

import (
	"fmt"
	"net/netip"
	"strings"
)

// AllowEntry returns an allow-list entry (webhooks.allow) as the sender's
// guard holds it — lower case, without brackets or a final dot, an IP in
// its canonical form — or an error naming it when it is not a host name,
// an IP or "*.suffix" (no scheme, port or path).
func AllowEntry(a string) (string, error) {
	e := strings.ToLower(strings.TrimSuffix(strings.Trim(a, "[]"), "."))
	if ip, err := netip.ParseAddr(e); err == nil {
		return ip.Unmap().String(), nil
	}
	name := strings.TrimPrefix(e, "*.")
	if name == "" || strings.ContainsAny(name, "*/:@?# ") || strings.Contains(name, "..") {
		return "", fmt.Errorf("%q is not a host name, an IP or *.suffix (no scheme, port or path)", a)
	}
	return e, nil
}

// CheckAllow reports an allow entry that is not a host name, an IP or
// "*.suffix" (no scheme, port or path).
func CheckAllow(entry string) error {
	_, err := AllowEntry(entry)
	return err
}
