package store

import (
	"strconv"
	"strings"
)

// MaxReasonBytes bounds every error and reason agentq stores or logs for a
// step: a provider's error body, a panic message or a dead letter's reason
// can be arbitrarily large, and each copy costs Redis memory and log volume.
const MaxReasonBytes = 4 << 10

// Excerpt returns s if it fits in MaxReasonBytes, else its start (never a
// rune cut in half) and a note of how much was cut, within MaxReasonBytes.
// Settle and RecordError apply it to what they write; callers use it for
// what they log and hand to asynq.
func Excerpt(s string) string {
	if len(s) <= MaxReasonBytes {
		return s
	}
	note := " … (" + strconv.Itoa(len(s)) + " bytes, cut)"
	return strings.ToValidUTF8(s[:MaxReasonBytes-len(note)], "") + note
}
