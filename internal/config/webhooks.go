package config

import (
	"fmt"

	"github.com/agentq/agentq/internal/hookcheck"
)

// Webhooks signs and sends workflow notifications (docs/webhooks.md). The
// zero value sends none, and a spec that asks for one (notify:) is refused.
type Webhooks struct {
	// Secret signs every delivery: "whsec_" and base64 (the Standard
	// Webhooks form), or raw bytes; at least 16 bytes. Usually
	// "${AGENTQ_WEBHOOK_SECRET}". Empty: no webhook is sent.
	Secret Secret `yaml:"secret"`
	// Allow lists the hosts webhooks may reach: a name, an IP, or
	// "*.suffix". Empty: any host with a public address. A loopback,
	// private or link-local address is reached only when its host is
	// listed exactly.
	Allow []string `yaml:"allow"`
	// URL, when set, is notified for every workflow whose spec has no
	// notify: of its own.
	URL string `yaml:"url"`
	// Events are the events URL hears; empty: all five (completed,
	// blocked, failed, timed_out, canceled).
	Events []string `yaml:"events"`
}

// Enabled reports whether webhooks can be sent (a secret is set).
func (w Webhooks) Enabled() bool { return w.Secret != "" }

func (w Webhooks) validate() []error {
	var errs []error
	bad := func(field, format string, a ...any) {
		errs = append(errs, &FieldError{Field: "webhooks." + field, Msg: fmt.Sprintf(format, a...)})
	}
	if w.Secret != "" {
		if _, err := hookcheck.ParseSecret(w.Secret.Reveal()); err != nil {
			bad("secret", "%v", err)
		}
	}
	for i, a := range w.Allow {
		if err := hookcheck.CheckAllow(a); err != nil {
			bad(fmt.Sprintf("allow[%d]", i), "%v", err)
		}
	}
	if w.URL != "" {
		if err := hookcheck.CheckURL(w.URL); err != nil {
			bad("url", "%v", err)
		}
		if w.Secret == "" {
			bad("secret", "is empty (webhooks.url needs a secret to sign with)")
		}
	}
	if i, ev := hookcheck.CheckEvents(w.Events); i >= 0 {
		bad(fmt.Sprintf("events[%d]", i), "unknown event %q (want %s)", ev, hookcheck.EventsHelp())
	}
	return errs
}
