package poll

import (
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

type recorder struct {
	testing.TB
	failed string
}

func (r *recorder) Helper() {}
func (r *recorder) Fatalf(format string, args ...any) {
	r.failed = format
	if len(args) > 1 {
		r.failed = args[1].(string)
	}
	panic(r)
}

func TestUntil(t *testing.T) {
	var n atomic.Int32
	Until(t, time.Second, func() (bool, string) { return n.Add(1) == 3, "" })
	if n.Load() != 3 {
		t.Fatalf("checked %d times", n.Load())
	}
	r := &recorder{TB: t}
	func() {
		defer func() { _ = recover() }()
		Until(r, 50*time.Millisecond, func() (bool, string) { return false, "still pending" })
	}()
	if !strings.Contains(r.failed, "still pending") {
		t.Fatalf("a condition that never holds did not fail with its explanation: %q", r.failed)
	}
}
