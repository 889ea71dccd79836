package hookcheck

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"unicode"
)

// CheckURL reports a URL that cannot be a webhook's destination: not
// http(s), no host, or credentials in it. Whether its host may be reached
// is the sender's guard's question, asked when it is delivered. A refusal
// never repeats the URL's path or query, where a hook's token lives.
func CheckURL(s string) error {
	u, err := url.Parse(s)
	switch {
	case s == "":
		return errors.New("is empty")
	case err != nil:
		return fmt.Errorf("%q is not a URL", s)
	case u.Scheme != "http" && u.Scheme != "https":
		return fmt.Errorf("%q is not an http(s) URL", s)
	case u.Hostname() == "":
		return fmt.Errorf("%q has no host", s)
	case u.User != nil:
		return fmt.Errorf("%s://%s…: a URL with user info is not allowed (put a token in the path or query)", u.Scheme, u.Host)
	case !hostName(u.Hostname()):
		return fmt.Errorf("%s://…: the host is not a name or an address (letters, digits, '-', '_' and '.')", u.Scheme)
	case u.Path == "/…" && u.RawQuery == "":
		return fmt.Errorf("%s://%s/…: is a webhook URL as the API shows it, its path hidden: give the hook's whole URL", u.Scheme, u.Host)
	}
	return nil
}

// hostName reports whether h is an IP address or a host name: labels of
// letters (any script), digits, '-' and '_', joined by dots.
func hostName(h string) bool {
	if net.ParseIP(h) != nil {
		return true
	}
	for _, r := range h {
		if !unicode.IsLetter(r) && !unicode.IsDigit(r) && r != '-' && r != '_' && r != '.' {
			return false
		}
	}
	return true
}
