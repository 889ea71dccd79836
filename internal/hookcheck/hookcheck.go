// Package hookcheck holds the checks of webhook settings that need no
// network: a destination URL, an allow-list entry, a signing secret, the
// event names, the deliveries' queue name. The configuration and the spec check with it without
// linking the package that sends (internal/webhook: its HTTP client, its
// SSRF guard's dialer, its queue), which checks with it too.
package hookcheck

import (
	"slices"
	"strings"
)

// Queue is the asynq queue webhook deliveries wait in (only workers with
// the signing secret serve it): the configuration refuses to shard it.
const Queue = "webhooks"

// The events a workflow can notify, named as its end states.
const (
	Completed = "completed"
	Blocked   = "blocked"
	Failed    = "failed"
	TimedOut  = "timed_out"
	Canceled  = "canceled"
)

// Events are every event, in the order docs list them; the default of a
// notify that names none.
var Events = []string{Completed, Blocked, Failed, TimedOut, Canceled}

// CheckEvents returns the index and name of the first unknown event, or
// -1.
func CheckEvents(events []string) (int, string) {
	for i, ev := range events {
		if !slices.Contains(Events, ev) {
			return i, ev
		}
	}
	return -1, ""
}

// EventsHelp names the events for an error message.
func EventsHelp() string { return strings.Join(Events, ", ") }
