package engine

import (
	"context"
	"errors"
	"io"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/agentq/agentq/internal/record"
	"github.com/agentq/agentq/internal/router"
	"github.com/agentq/agentq/internal/store"
	"github.com/agentq/agentq/llmclient"
)

// Streamed text goes to the event log coalesced: a step.delta is written
// once deltaBytes of text wait, or deltaEvery after the last write, and
// when the answer ends.
const (
	deltaEvery = 50 * time.Millisecond
	deltaBytes = 1 << 10
)

// streamer is a Caller that streams (the worker's router).
type streamer interface {
	ChatStream(ctx context.Context, route string, req llmclient.Request) (*router.Stream, error)
}

// deltaLog coalesces a step's streamed text into step.delta events,
// written once deltaBytes wait or deltaEvery after the last write (the
// stream's start, at first); the last piece rides with the step's outcome.
type deltaLog struct {
	l    *stepLog
	buf  strings.Builder
	last time.Time
}

func newDeltaLog(l *stepLog) *deltaLog { return &deltaLog{l: l, last: time.Now()} }

func (d *deltaLog) add(text string) {
	if d.l == nil || text == "" {
		return
	}
	d.buf.WriteString(text)
	if d.buf.Len() >= deltaBytes || time.Since(d.last) >= deltaEvery {
		d.push()
		d.l.log()
	}
}

// push hands the text waiting to the step's log.
func (d *deltaLog) push() {
	if d.l == nil {
		return
	}
	d.l.addText(d.buf.String())
	d.buf.Reset()
	d.last = time.Now()
}

// addText adds text as step.delta events, each within the log's bound on
// an event's text (never cut: the deltas join to the answer).
func (l *stepLog) addText(text string) {
	for len(text) > 0 {
		n := min(len(text), store.MaxEventTextBytes)
		for n < len(text) && n > 0 && !utf8.RuneStart(text[n]) {
			n--
		}
		if n == 0 { // no rune start in reach: not UTF-8; cut where the bound is
			n = min(len(text), store.MaxEventTextBytes)
		}
		l.add(store.Event{Type: record.EventDelta, Text: text[:n]})
		text = text[n:]
	}
}

// reset says the text streamed so far is void (a failover midway, or a
// failed stream whose attempt will be retried), at once.
func (d *deltaLog) reset() {
	if d.l == nil {
		return
	}
	d.buf.Reset()
	d.l.add(store.Event{Type: record.EventStreamReset})
	d.l.log()
	d.last = time.Now()
}

// streamChat asks route for req's answer as a stream, logging its text as
// it comes and handing each piece to onDelta (nil: none); it returns the
// whole answer. A caller that cannot stream answers whole (one piece).
func streamChat(ctx context.Context, c Caller, route string, req llmclient.Request, onDelta func(string)) (*llmclient.Response, error) {
	d := newDeltaLog(stepLogOf(ctx))
	sr, ok := c.(streamer)
	if !ok {
		resp, err := c.Chat(ctx, route, req)
		if err == nil {
			d.add(resp.Text)
			d.push()
			if onDelta != nil {
				onDelta(resp.Text)
			}
		}
		return resp, err
	}
	st, err := sr.ChatStream(ctx, route, req)
	if err != nil {
		return nil, err
	}
	defer st.Close()
	streamed := false
	for {
		piece, err := st.Recv()
		switch {
		case errors.Is(err, router.ErrStreamReset):
			d.reset()
			continue
		case errors.Is(err, io.EOF):
			d.push()
			return st.Response(), nil
		case err != nil:
			if streamed {
				d.reset() // this attempt's text is void: a retry starts it again
			}
			return nil, err
		}
		d.add(piece)
		streamed = streamed || piece != ""
		if onDelta != nil && piece != "" {
			onDelta(piece)
		}
	}
}
