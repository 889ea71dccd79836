package engine

import (
	"context"
	"errors"
	"io"
	"strings"
	"time"

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

// deltaLog coalesces a step's streamed text into step.delta events.
type deltaLog struct {
	l    *stepLog
	ctx  context.Context
	buf  strings.Builder
	last time.Time
}

func (d *deltaLog) add(text string) {
	if d.l == nil || text == "" {
		return
	}
	d.buf.WriteString(text)
	if d.buf.Len() >= deltaBytes || time.Since(d.last) >= deltaEvery {
		d.flush()
	}
}

func (d *deltaLog) flush() {
	if d.l == nil || d.buf.Len() == 0 {
		return
	}
	d.l.log(d.ctx, store.Event{Type: record.EventDelta, Text: d.buf.String()})
	d.buf.Reset()
	d.last = time.Now()
}

// reset says the text streamed so far is void (a failover midway, or a
// failed stream whose attempt will be retried).
func (d *deltaLog) reset() {
	if d.l == nil {
		return
	}
	d.buf.Reset()
	d.l.log(d.ctx, store.Event{Type: record.EventStreamReset})
	d.last = time.Now()
}

// streamChat asks route for req's answer as a stream, logging its text as
// it comes and handing each piece to onDelta (nil: none); it returns the
// whole answer. A caller that cannot stream answers whole (one piece).
func streamChat(ctx context.Context, c Caller, route string, req llmclient.Request, onDelta func(string)) (*llmclient.Response, error) {
	d := &deltaLog{l: stepLogOf(ctx), ctx: ctx}
	sr, ok := c.(streamer)
	if !ok {
		resp, err := c.Chat(ctx, route, req)
		if err == nil {
			d.add(resp.Text)
			d.flush()
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
	for {
		piece, err := st.Recv()
		switch {
		case errors.Is(err, router.ErrStreamReset):
			d.reset()
			continue
		case errors.Is(err, io.EOF):
			d.flush()
			return st.Response(), nil
		case err != nil:
			if d.buf.Len() > 0 || !d.last.IsZero() {
				d.reset() // this attempt's text is void: a retry starts it again
			}
			return nil, err
		}
		d.add(piece)
		if onDelta != nil && piece != "" {
			onDelta(piece)
		}
	}
}
