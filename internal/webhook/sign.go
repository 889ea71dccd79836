package webhook

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/agentq/agentq/internal/hookcheck"
)

// The headers of a signed delivery (Standard Webhooks).
const (
	HeaderID        = "webhook-id"
	HeaderTimestamp = "webhook-timestamp"
	HeaderSignature = "webhook-signature"
)

// MinSecretBytes is the shortest signing key accepted.
const MinSecretBytes = hookcheck.MinSecretBytes

// ParseSecret returns the signing key of a secret: "whsec_" and base64 is
// decoded (as Standard Webhooks libraries do); anything else is used as
// its bytes (hookcheck.ParseSecret).
func ParseSecret(secret string) ([]byte, error) { return hookcheck.ParseSecret(secret) }

// Sign returns the webhook-signature value of a delivery: "v1," and the
// base64 HMAC-SHA256 of id "." timestamp "." body.
func Sign(key []byte, id string, timestamp int64, body []byte) string {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(id + "." + strconv.FormatInt(timestamp, 10) + "."))
	m.Write(body)
	return "v1," + base64.StdEncoding.EncodeToString(m.Sum(nil))
}

// ErrBadSignature is wrapped by every refusal of Verify.
var ErrBadSignature = errors.New("webhook signature not verified")

// Verify checks a delivery as a receiver does: its headers are present,
// its timestamp is within tolerance of now (either way), and one of the
// signatures in webhook-signature (space-separated) is v1 and matches.
func Verify(key []byte, h http.Header, body []byte, now time.Time, tolerance time.Duration) error {
	id, ts, sigs := h.Get(HeaderID), h.Get(HeaderTimestamp), h.Get(HeaderSignature)
	if id == "" || ts == "" || sigs == "" {
		return fmt.Errorf("%w: missing webhook-id, webhook-timestamp or webhook-signature", ErrBadSignature)
	}
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return fmt.Errorf("%w: webhook-timestamp %q is not unix seconds", ErrBadSignature, ts)
	}
	if d := now.Sub(time.Unix(sec, 0)); d > tolerance || d < -tolerance {
		return fmt.Errorf("%w: timestamp is %s from now, over %s", ErrBadSignature, d.Round(time.Second), tolerance)
	}
	want := Sign(key, id, sec, body)
	for _, s := range strings.Fields(sigs) {
		if hmac.Equal([]byte(s), []byte(want)) {
			return nil
		}
	}
	return fmt.Errorf("%w: no matching v1 signature", ErrBadSignature)
}
