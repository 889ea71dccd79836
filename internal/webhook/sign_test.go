package webhook_test

import (
	"encoding/base64"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/agentq/agentq/internal/webhook"
)

// The signature is the Standard Webhooks one: the reference library
// verifies what Sign writes, for a whsec_ secret (base64-decoded) and for a
// raw one (its bytes), and the spec's own test vector comes out.
func TestSignatureIsStandardWebhooks(t *testing.T) {
	body := []byte(`{"type":"workflow.completed","timestamp":"2026-01-02T03:04:05Z","data":{"id":"wf_1","name":"n","state":"completed"}}`)
	now := time.Now()
	raw := "a raw secret of 32 bytes, really"
	for _, c := range []struct {
		secret string
		ref    func() (*standardwebhooks.Webhook, error)
	}{
		{"whsec_" + base64.StdEncoding.EncodeToString([]byte("0123456789abcdef0123456789abcdef")), nil},
		{raw, func() (*standardwebhooks.Webhook, error) { return standardwebhooks.NewWebhookRaw([]byte(raw)) }},
	} {
		key, err := webhook.ParseSecret(c.secret)
		if err != nil {
			t.Fatal(err)
		}
		h := http.Header{}
		h.Set(webhook.HeaderID, "msg_wf_1_completed")
		h.Set(webhook.HeaderTimestamp, strconv.FormatInt(now.Unix(), 10))
		h.Set(webhook.HeaderSignature, webhook.Sign(key, "msg_wf_1_completed", now.Unix(), body))
		ref, err := standardwebhooks.NewWebhook(c.secret)
		if c.ref != nil {
			ref, err = c.ref()
		}
		if err != nil {
			t.Fatal(err)
		}
		if err := ref.Verify(body, h); err != nil {
			t.Errorf("secret %.10s…: the reference library refuses our signature: %v", c.secret, err)
		}
		if err := webhook.Verify(key, h, body, now, 5*time.Minute); err != nil {
			t.Errorf("secret %.10s…: Verify refuses Sign: %v", c.secret, err)
		}
	}
	key, _ := webhook.ParseSecret("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
	if got, want := webhook.Sign(key, "msg_p5jXN8AQM9LWM0D4loKWxJek", 1614265330, []byte(`{"test": 2432232314}`)),
		"v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="; got != want {
		t.Errorf("the spec's test vector: got %s, want %s", got, want)
	}
}

func TestVerifyRefuses(t *testing.T) {
	key := []byte("0123456789abcdef0123456789abcdef")
	now := time.Unix(1_800_000_000, 0)
	body := []byte(`{"a":1}`)
	signed := func(ts time.Time, b []byte) http.Header {
		h := http.Header{}
		h.Set(webhook.HeaderID, "msg_x")
		h.Set(webhook.HeaderTimestamp, strconv.FormatInt(ts.Unix(), 10))
		h.Set(webhook.HeaderSignature, "v0,bm9wZQ== "+webhook.Sign(key, "msg_x", ts.Unix(), b))
		return h
	}
	if err := webhook.Verify(key, signed(now, body), body, now, 5*time.Minute); err != nil {
		t.Fatalf("a good delivery (with another version's signature before it): %v", err)
	}
	for name, c := range map[string]struct {
		h    http.Header
		body []byte
		key  []byte
		want string
	}{
		"tampered body":   {signed(now, body), []byte(`{"a":2}`), key, "no matching"},
		"other key":       {signed(now, body), body, []byte("another key, 16 bytes or more"), "no matching"},
		"six minutes ago": {signed(now.Add(-6*time.Minute), body), body, key, "timestamp"},
		"six minutes on":  {signed(now.Add(6*time.Minute), body), body, key, "timestamp"},
		"no headers":      {http.Header{}, body, key, "missing"},
	} {
		err := webhook.Verify(c.key, c.h, c.body, now, 5*time.Minute)
		if !errors.Is(err, webhook.ErrBadSignature) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want ErrBadSignature saying %q", name, err, c.want)
		}
	}
}

func TestParseSecret(t *testing.T) {
	if _, err := webhook.ParseSecret("whsec_!!!not base64"); err == nil || !strings.Contains(err.Error(), "base64") {
		t.Errorf("bad base64: %v", err)
	}
	if _, err := webhook.ParseSecret("short"); err == nil || !strings.Contains(err.Error(), "under 16") {
		t.Errorf("short secret: %v", err)
	}
	if k, err := webhook.ParseSecret("whsec_" + base64.StdEncoding.EncodeToString([]byte("sixteen bytes!!!"))); err != nil || string(k) != "sixteen bytes!!!" {
		t.Errorf("whsec_: %q %v", k, err)
	}
}
