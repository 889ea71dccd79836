package dashboard_test

import (
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentq/agentq/internal/dashboard"
	"github.com/agentq/agentq/internal/store"
	"github.com/agentq/agentq/internal/testenv"
)

// hugeMultipart is a multipart form of about size bytes (one file part of
// filler after a decision field), counting what the server read of it.
type hugeMultipart struct {
	head, tail string
	filler     int64
	read       atomic.Int64
}

func newHugeMultipart(size int64) *hugeMultipart {
	const b = "XBOUNDARYX"
	return &hugeMultipart{
		head: "--" + b + "\r\nContent-Disposition: form-data; name=\"decision\"\r\n\r\napprove\r\n--" + b +
			"\r\nContent-Disposition: form-data; name=\"upload\"; filename=\"x.bin\"\r\nContent-Type: application/octet-stream\r\n\r\n",
		tail:   "\r\n--" + b + "--\r\n",
		filler: size,
	}
}

func (h *hugeMultipart) Read(p []byte) (int, error) {
	n := 0
	switch {
	case h.head != "":
		n = copy(p, h.head)
		h.head = h.head[n:]
	case h.filler > 0:
		n = int(min(int64(len(p)), h.filler))
		for i := range n {
			p[i] = 'x'
		}
		h.filler -= int64(n)
	case h.tail != "":
		n = copy(p, h.tail)
		h.tail = h.tail[n:]
	default:
		return 0, io.EOF
	}
	h.read.Add(int64(n))
	return n, nil
}

// Every form route and API action bounds what it reads of a body as the
// sign-in form does: a 200 MB multipart upload to a decision route was
// read whole (the dashboard grew from 40 to 262 MB); now it is refused
// with 413 after its first 64 KiB, and decides nothing.
func TestFormRoutesBoundTheirBodies(t *testing.T) {
	e := testenv.Start(t, testenv.Options{})
	d := serveDash(t, e, dashboard.Options{})
	id := e.Submit(t, e.Spec("name: gate\nsteps:\n  - { id: gate, approve: { message: \"ship it\" } }\n"))
	e.Wait(t, id, 20*time.Second, store.StateWaiting)
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	for _, path := range []string{
		"/workflows/" + id + "/steps/gate/decision", "/workflows/" + id + "/cancel", "/workflows/" + id + "/rerun",
		"/queues/default/pause", "/dlq/nope/requeue", "/login",
		"/api/v1/workflows/" + id + "/steps/gate/decision", "/api/v1/workflows/" + id + "/cancel",
	} {
		body := newHugeMultipart(200 << 20)
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, d.URL+path, body)
		req.Header.Set("Content-Type", "multipart/form-data; boundary=XBOUNDARYX")
		req.Header.Set("Origin", d.URL)
		req.Header.Set("Sec-Fetch-Site", "same-origin")
		resp, err := client.Do(req)
		code := 0
		if err == nil {
			b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
			resp.Body.Close()
			code = resp.StatusCode
			if code != http.StatusRequestEntityTooLarge && code != http.StatusBadRequest && code != http.StatusSeeOther {
				t.Errorf("POST %s with 200 MB: %d %s", path, code, strings.TrimSpace(string(b)))
			}
		}
		// the server stopped reading: what was read is the limit plus what
		// the sockets buffer, not the upload
		if n := body.read.Load(); n > 16<<20 {
			t.Errorf("POST %s (%d): %d MB of the 200 MB upload read", path, code, n>>20)
		}
	}
	w, err := e.Store.Get(t.Context(), id)
	if err != nil || w.State != store.StateWaiting {
		t.Fatalf("after the uploads the workflow is %s (%v): a bounded body decided or canceled it", w.State, err)
	}
}
