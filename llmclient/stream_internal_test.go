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
	// 60 pieces of 10 bytes, one each 20 ms, each the next part of a
	// secret: the text is held until holdBack bytes wait (about 52 pieces,
	// a second), well past the 300 ms stall limit, which each piece is 15
	// times inside
	secret := strings.Repeat("0123456789", 60)
	pieces := make([]string, 60)
	for i := range pieces {
		pieces[i] = secret[10*i : 10*i+10]
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := newStream(ctx, cancel, 300*time.Millisecond, time.Now, redact.New(secret), scripted(pieces, 20*time.Millisecond), func(err error) error { return err })
	defer s.Close()
	if got, err := readAll(t, s); err != nil || strings.Contains(got, "0123") {
		t.Fatalf("read %q: %v", got, err)
	}
}

// Ordinary text is handed out piece by piece as it comes; the end of a
// piece that may begin a secret or a key waits for the next, so one split
// across pieces is removed whole, and text that only began like one is
// handed out as it is.
func TestStreamHandsOutTextAsItComes(t *testing.T) {
	const secret = "changeme-2024-redis"
	red := redact.New(secret)
	for _, c := range []struct {
		pieces []string
		out    []string // what each Recv hands out (none when all is held), the last at the end
	}{
		{[]string{"one ", "two ", "three ", "four"}, []string{"one ", "two ", "three ", "fou", "r"}}, // "r" is in the secret
		{[]string{"the password: change", "me-2024-redis, and more ", "words"}, []string{"the password: ", "[redacted], and more ", "word", "s"}},
		{[]string{"what I would change", " the plan to ", "be"}, []string{"what I would ", "change the plan to ", "be"}},
		{[]string{"use sk-", "abcdefghijklmnopqrstuvwxyz", "0123 please"}, []string{"use ", "sk-[redacted] pleas", "e"}},
		{[]string{"send Bear", "er abcdefghijklmnopqrstuvwxyz", " then"}, []string{"send ", "Bearer [redacted] the", "n"}},
	} {
		ctx, cancel := context.WithCancel(context.Background())
		s := newStream(ctx, cancel, 0, time.Now, red, scripted(c.pieces, 0), func(err error) error { return err })
		var got []string
		for {
			p, err := s.Recv()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatalf("pieces %q: %v", c.pieces, err)
			}
			got = append(got, p)
		}
		s.Close()
		if strings.Join(got, "|") != strings.Join(c.out, "|") || s.Response().Text != strings.Join(got, "") {
			t.Errorf("pieces %q: handed out %q, want %q; Text %q", c.pieces, got, c.out, s.Response().Text)
		}
	}
}

// However a text is cut into pieces, what is handed out holds no run of
// 8 of a secret's characters and no key.
func TestStreamRedactsAtEveryCut(t *testing.T) {
	const secret = "changeme-2024-redis"
	text := "say changeme-2024-redis, Bearer abcdefghijklmnopqrstu and sk-abcdefghijklmnopqrstuvwx done"
	red := redact.New(secret)
	for i := 1; i < len(text); i++ {
		for j := i; j < len(text); j += 3 {
			ctx, cancel := context.WithCancel(context.Background())
			s := newStream(ctx, cancel, 0, time.Now, red, scripted([]string{text[:i], text[i:j], text[j:]}, 0), func(err error) error { return err })
			got, err := readAll(t, s)
			s.Close()
			if err != nil {
				t.Fatal(err)
			}
			for k := 0; k+8 <= len(secret); k++ {
				if strings.Contains(got, secret[k:k+8]) {
					t.Fatalf("cuts %d, %d: %q holds %q", i, j, got, secret[k:k+8])
				}
			}
			if strings.Contains(got, "abcdefghijklmnop") {
				t.Fatalf("cuts %d, %d: %q holds a key", i, j, got)
			}
		}
	}
}
