// Command webhook-receiver receives agentq's workflow webhooks and checks
// each one as a receiver should (docs/webhooks.md): the signature (Standard
// Webhooks: HMAC-SHA256 of "id.timestamp.body" with the shared secret), a
// timestamp within five minutes of now, and the event id, so that a
// redelivery is acknowledged but handled once.
//
//	AGENTQ_WEBHOOK_SECRET=whsec_… go run ./examples/webhook-receiver --addr 127.0.0.1:8090
//
// and in agentq.yaml: webhooks: { secret: "${AGENTQ_WEBHOOK_SECRET}",
// allow: [127.0.0.1], url: "http://127.0.0.1:8090/hooks/agentq" }.
package main

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
)

// tolerance is how far a delivery's timestamp may be from now: an older
// one may be a replay of a captured request.
const tolerance = 5 * time.Minute

// maxBody bounds what is read of a request.
const maxBody = 1 << 20

func main() {
	addr := flag.String("addr", "127.0.0.1:8090", "address to listen on")
	flag.Parse()
	key, err := parseSecret(os.Getenv("AGENTQ_WEBHOOK_SECRET"))
	if err != nil {
		log.Fatalf("AGENTQ_WEBHOOK_SECRET: %v", err)
	}
	rc := newReceiver(key, time.Now, func(e event) {
		fmt.Printf("%s %s (%s) %s unfinished=%v %s\n", e.Timestamp.Format(time.RFC3339), e.Type, e.Data.Name, e.Data.ID, e.Data.Unfinished, e.Data.Error)
	})
	srv := &http.Server{Addr: *addr, Handler: rc, ReadHeaderTimeout: 5 * time.Second}
	log.Printf("listening on %s", *addr)
	log.Fatal(srv.ListenAndServe())
}

// event is the body agentq posts.
type event struct {
	Type      string    `json:"type"` // workflow.completed, .blocked, .failed, .timed_out, .canceled
	Timestamp time.Time `json:"timestamp"`
	Data      struct {
		ID         string   `json:"id"`
		Name       string   `json:"name"`
		State      string   `json:"state"`
		Unfinished []string `json:"unfinished_steps"`
		Error      string   `json:"error"`
	} `json:"data"`
}

// receiver verifies deliveries and hands each event to handle once.
type receiver struct {
	key    []byte
	now    func() time.Time
	handle func(event)
	mu     sync.Mutex
	seen   map[string]bool // webhook-ids handled; a real receiver keeps them in its database
}

func newReceiver(key []byte, now func() time.Time, handle func(event)) *receiver {
	return &receiver{key: key, now: now, handle: handle, seen: map[string]bool{}}
}

func (rc *receiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		http.Error(w, "POST only", http.StatusMethodNotAllowed)
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, maxBody))
	if err != nil {
		http.Error(w, "cannot read the body", http.StatusBadRequest)
		return
	}
	if err := verify(rc.key, r.Header, body, rc.now()); err != nil {
		log.Printf("refused a delivery: %v", err)
		http.Error(w, "signature not verified", http.StatusUnauthorized)
		return
	}
	var e event
	if err := json.Unmarshal(body, &e); err != nil {
		http.Error(w, "the body is not an event", http.StatusBadRequest)
		return
	}
	id := r.Header.Get("webhook-id")
	rc.mu.Lock()
	again := rc.seen[id]
	rc.seen[id] = true
	rc.mu.Unlock()
	if !again { // a redelivery (agentq delivers at least once) is acknowledged, not handled twice
		rc.handle(e)
	}
	w.WriteHeader(http.StatusNoContent)
}

// verify checks a delivery's headers against its body: the timestamp is
// within tolerance of now, and a v1 signature in webhook-signature (there
// may be several, space-separated) is the HMAC-SHA256 of
// "webhook-id.webhook-timestamp.body", compared in constant time.
func verify(key []byte, h http.Header, body []byte, now time.Time) error {
	id, ts, sigs := h.Get("webhook-id"), h.Get("webhook-timestamp"), h.Get("webhook-signature")
	if id == "" || ts == "" || sigs == "" {
		return errors.New("missing webhook-id, webhook-timestamp or webhook-signature")
	}
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return fmt.Errorf("webhook-timestamp %q is not unix seconds", ts)
	}
	if d := now.Sub(time.Unix(sec, 0)); d > tolerance || d < -tolerance {
		return fmt.Errorf("timestamp %s is more than %s from now", time.Unix(sec, 0).UTC().Format(time.RFC3339), tolerance)
	}
	m := hmac.New(sha256.New, key)
	m.Write([]byte(id + "." + strconv.FormatInt(sec, 10) + "."))
	m.Write(body)
	want := "v1," + base64.StdEncoding.EncodeToString(m.Sum(nil))
	for _, s := range strings.Fields(sigs) {
		if hmac.Equal([]byte(s), []byte(want)) {
			return nil
		}
	}
	return errors.New("no matching signature")
}

// parseSecret is the signing key: a "whsec_" secret is base64 after its
// prefix; any other is used as it is.
func parseSecret(s string) ([]byte, error) {
	if s == "" {
		return nil, errors.New("is empty")
	}
	if b64, ok := strings.CutPrefix(s, "whsec_"); ok {
		key, err := base64.StdEncoding.DecodeString(b64)
		if err != nil {
			return nil, errors.New("not valid base64 after whsec_")
		}
		return key, nil
	}
	return []byte(s), nil
}
