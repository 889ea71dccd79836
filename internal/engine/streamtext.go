package engine

import (
	"context"
	"errors"
	"io"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/agentq/agentq/internal/record"
	"github.com/agentq/agentq/internal/router"
	"github.com/agentq/agentq/internal/store"
	"github.com/agentq/agentq/llmclient"
)

// Streamed text goes to the event log coalesced: a step.delta is written
// once deltaBytes of text wait, or deltaEvery after the last write (a
// timer writes what waits when no more text comes to), and the last piece
// rides with the step's outcome. A stream that answers within deltaEvery
// costs the log no write of its own; a slow one one write a deltaEvery.
const (
	deltaEvery = 100 * time.Millisecond
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
	l *stepLog

	mu    sync.Mutex
	buf   strings.Builder
	last  time.Time   // the last write (the stream's start, at first)
	timer *time.Timer // writes what waits deltaEvery after the last write
}

// newDeltaLog starts logging a stream's text. An attempt after the first
// begins its first stream with a step.stream_reset (riding with its first
// text): whatever an earlier attempt streamed is void, also when that
// attempt could not say so (its worker was killed, or its answer failed
// after it had streamed).
func newDeltaLog(l *stepLog) *deltaLog {
	if l != nil && l.attempt > 1 && l.firstStream() {
		l.add(store.Event{Type: record.EventStreamReset})
	}
	return &deltaLog{l: l, last: time.Now()}
}

func (d *deltaLog) add(text string) {
	if d.l == nil || text == "" {
		return
	}
	d.mu.Lock()
	d.buf.WriteString(text)
	wait := deltaEvery - time.Since(d.last)
	due := d.buf.Len() >= deltaBytes || wait <= 0
	if !due && d.timer == nil {
		d.timer = time.AfterFunc(wait, d.flush)
	}
	d.mu.Unlock()
	if due {
		d.flush()
	}
}

// flush writes the text waiting now.
func (d *deltaLog) flush() {
	d.mu.Lock()
	d.pushLocked()
	d.mu.Unlock()
	d.l.log()
}

// push hands the text waiting to the step's log, for its outcome to
// carry, and stops the timer: the stream has ended.
func (d *deltaLog) push() {
	if d.l == nil {
		return
	}
	d.mu.Lock()
	d.pushLocked()
	d.mu.Unlock()
}

func (d *deltaLog) pushLocked() {
	if d.timer != nil {
		d.timer.Stop()
		d.timer = nil
	}
	if d.buf.Len() > 0 {
		d.l.addText(d.buf.String())
		d.buf.Reset()
	}
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
	d.mu.Lock()
	d.buf.Reset()
	d.pushLocked()
	d.l.add(store.Event{Type: record.EventStreamReset})
	d.mu.Unlock()
	d.l.log()
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
			d.l.addText(resp.Text) // with the outcome: nothing to show sooner
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
	defer d.push() // what waits rides with the outcome; no write after it
	streamed := false
	for {
		piece, err := st.Recv()
		switch {
		case errors.Is(err, router.ErrStreamReset):
			d.reset()
			continue
		case errors.Is(err, io.EOF):
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
