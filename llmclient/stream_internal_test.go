package llmclient

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/agentq/agentq/redact"
)

// scripted is a stream source handing out pieces, each after gap (a
// provider's pace, not a wait for anything), then the end.
func scripted(pieces []string, gap time.Duration) streamOpener {
	return func() (streamSource, func(), error) {
		i := 0
		return func() (string, *Response, error) {
			time.Sleep(gap)
			if i == len(pieces) {
				return "", &Response{}, nil
			}
			i++
			return pieces[i-1], nil, nil
		}, func() {}, nil
	}
}

func readAll(t *testing.T, s *Stream) (string, error) {
	t.Helper()
	var b strings.Builder
	for {
		p, err := s.Recv()
		if errors.Is(err, io.EOF) {
			return b.String(), nil
		}
		if err != nil {
			return b.String(), err
		}
		b.WriteString(p)
	}
}

// Text that merely begins like a secret where a piece ends is left as it
// is (it was "redacted" for good when the window was redacted whole), and
// a secret split across pieces is removed.
func TestStreamRedactsAcrossPiecesWithoutFalseCuts(t *testing.T) {
	red := redact.New("changeme-2024-redis")
	filler := strings.Repeat("x", holdBack)
	for _, c := range []struct {
		pieces []string
		want   string
	}{
		{[]string{"Here is what I would change", " the plan to." + filler}, "Here is what I would change the plan to." + filler},
		{[]string{"the password: change", "me-2024-redis, " + filler}, "the password: [redacted], " + filler},
	} {
		ctx, cancel := context.WithCancel(context.Background())
		s := newStream(ctx, cancel, 0, time.Now, red, scripted(c.pieces, 0), func(err error) error { return err })
		got, err := readAll(t, s)
		if err != nil || got != c.want || s.Response().Text != got {
			t.Errorf("pieces %q: read %q (%v), want %q; Text %q", c.pieces, got, err, c.want, s.Response().Text)
		}
		s.Close()
	}
}

// A stream whose text is held back (or whose chunks carry only tool
// calls) does not stall while chunks keep coming.
func TestHeldBackTextDoesNotStall(t *testing.T) {
	// 60 pieces of 10 bytes, one each 20 ms: the first text is handed out
	// after about 52 pieces (a second), well past the 300 ms stall limit,
	// which each piece is 15 times inside
	pieces := make([]string, 60)
	for i := range pieces {
		pieces[i] = "0123456789"
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := newStream(ctx, cancel, 300*time.Millisecond, time.Now, nil, scripted(pieces, 20*time.Millisecond), func(err error) error { return err })
	defer s.Close()
	if got, err := readAll(t, s); err != nil || got != strings.Repeat("0123456789", 60) {
		t.Fatalf("read %q: %v", got, err)
	}
}
