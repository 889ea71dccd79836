package dashboard

import (
	"context"
	"errors"
	"log/slog"
	"math/rand/v2"
	"net"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/agentq/agentq/internal/flow"
	"github.com/agentq/agentq/internal/producer"
	"github.com/agentq/agentq/internal/record"
)

// The event streams of one dashboard share one reader a workflow (a
// topic). Every append to a workflow's log is announced on its own
// Pub/Sub channel (producer.Feed.Channel); the hub holds one Pub/Sub
// connection, subscribed to the channels of the workflows someone
// follows. On a notice the workflow's topic reads the new entries once,
// from the last event it read, and hands them to every follower. A
// follower reads its history itself (and again whenever it fell behind);
// an idle follower costs Redis nothing, and a topic only a read every
// safetyPoll besides.

// safetyPoll is how often a topic reads its workflow's log when no notice
// came: it ends the streams of a workflow that logs nothing (events off)
// once it is over, and catches a notice lost with a connection that went
// away without a word.
const safetyPoll = 30 * time.Second

// maxPending bounds the events a follower holds that it has not written
// yet; past it, the follower drops them and reads the log itself from its
// last event on (it is slow, or still writing its history).
const maxPending = 1000

// pubSubCheck is how often the Pub/Sub connection is pinged when quiet:
// a connection that died silently is replaced, and its channels
// subscribed again (each topic then reads what it missed).
const pubSubCheck = 5 * time.Second

// hub is the dashboard's topics and their Pub/Sub connection.
type hub struct {
	feed *producer.Feed
	log  *slog.Logger
	// safety is safetyPoll (tests shorten it)
	safety time.Duration

	ctx    context.Context // ends with close
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu     sync.Mutex
	topics map[string]*topic // by channel

	subMu sync.Mutex // orders subscribes and unsubscribes; guards ps
	ps    *redis.PubSub
}

// topic is one followed workflow: its reader's state and its followers.
type topic struct {
	id, channel string
	kick        chan struct{}          // a notice came (or a subscription did): read
	done        chan struct{}          // closed when its last follower left
	followers   map[*follower]struct{} // guarded by hub.mu
}

// follower is one event stream's share of its topic.
type follower struct {
	t    *topic
	wake chan struct{} // something to take

	mu      sync.Mutex
	pending [][]record.Event // batches the topic read, shared with the other followers
	held    int              // events in pending
	behind  bool             // read the log itself from its last event on
	caught  bool             // it read the log itself up to read
	read    string           // (its last event then; "": none)
	over    bool             // the workflow is over (or gone) without a last event to say so
	err     error            // its topic could not read the log
}

func newHub(ctx context.Context, feed *producer.Feed, log *slog.Logger) *hub {
	h := &hub{feed: feed, log: log, safety: safetyPoll, topics: map[string]*topic{}}
	h.ctx, h.cancel = context.WithCancel(context.WithoutCancel(ctx))
	return h
}

// close stops every topic and the Pub/Sub connection; the streams end on
// their own (Server.StopStreams).
func (h *hub) close() {
	h.cancel()
	h.subMu.Lock()
	if h.ps != nil {
		_ = h.ps.Close()
	}
	h.subMu.Unlock()
	h.wg.Wait()
}

// join makes a follower of workflow id. It starts behind: it reads its
// history itself, then takes what the topic reads.
func (h *hub) join(id string) *follower {
	ch := h.feed.Channel(id)
	h.mu.Lock()
	defer h.mu.Unlock()
	t := h.topics[ch]
	if t == nil {
		t = &topic{id: id, channel: ch, kick: make(chan struct{}, 1), done: make(chan struct{}), followers: map[*follower]struct{}{}}
		h.topics[ch] = t
		h.wg.Add(1)
		go h.run(t)
	}
	f := &follower{t: t, wake: make(chan struct{}, 1), behind: true}
	t.followers[f] = struct{}{}
	return f
}

// leave ends a follower; the last one ends its topic.
func (h *hub) leave(f *follower) {
	h.mu.Lock()
	defer h.mu.Unlock()
	t := f.t
	delete(t.followers, f)
	if len(t.followers) == 0 && h.topics[t.channel] == t {
		delete(h.topics, t.channel)
		close(t.done)
	}
}

// notice kicks the topic of a channel, if any.
func (h *hub) notice(channel string) {
	h.mu.Lock()
	t := h.topics[channel]
	h.mu.Unlock()
	if t != nil {
		select {
		case t.kick <- struct{}{}:
		default:
		}
	}
}

// subscribe subscribes to a topic's channel, opening the Pub/Sub
// connection on first use. The subscription's confirmation kicks the
// topic: from then on no notice is missed. go-redis subscribes again
// after a reconnection, and each confirmation kicks its topic again.
func (h *hub) subscribe(t *topic) {
	h.subMu.Lock()
	defer h.subMu.Unlock()
	if h.ctx.Err() != nil {
		return
	}
	if h.ps == nil {
		h.openPubSub()
	}
	// an error leaves the channel among the connection's: it is
	// subscribed again when the connection is
	if err := h.ps.Subscribe(h.ctx, t.channel); err != nil && h.ctx.Err() == nil {
		h.log.Warn("dashboard: event streams: subscribe (retried with the connection)", "wf", flow.BoundID(t.id), "err", err)
	}
}

// openPubSub opens the Pub/Sub connection, subscribed to every followed
// workflow's channel, and listens on it; h.subMu is held.
func (h *hub) openPubSub() {
	h.ps = h.feed.Subscribe(h.ctx)
	h.mu.Lock()
	channels := make([]string, 0, len(h.topics))
	for ch := range h.topics {
		channels = append(channels, ch)
	}
	h.mu.Unlock()
	if len(channels) > 0 {
		_ = h.ps.Subscribe(h.ctx, channels...) // an error: subscribed again with the connection
	}
	h.wg.Add(1)
	go h.listen(h.ps)
}

// listen hands the notices and subscriptions of ps to their topics. When
// the connection fails, every topic reads its log: a read that fails too
// ends its streams with the error ("event: error", as a stream that read
// for itself did), so that their clients resume elsewhere or say so; go-redis
// connects again (and subscribes again) on the next receive. A quiet
// connection is pinged every pubSubCheck; one that does not answer is
// replaced.
func (h *hub) listen(ps *redis.PubSub) {
	defer h.wg.Done()
	pinged := false
	for {
		m, err := ps.ReceiveTimeout(h.ctx, pubSubCheck)
		if h.ctx.Err() != nil || errors.Is(err, redis.ErrClosed) {
			return
		}
		var ne net.Error
		switch {
		case err != nil && errors.As(err, &ne) && ne.Timeout() && !pinged:
			pinged = true
			_ = ps.Ping(h.ctx)
			continue
		case err != nil && errors.As(err, &ne) && ne.Timeout():
			h.log.Warn("dashboard: event streams: the Pub/Sub connection does not answer; opening another")
			h.subMu.Lock()
			if h.ps == ps && h.ctx.Err() == nil {
				h.openPubSub()
			}
			h.subMu.Unlock()
			_ = ps.Close()
			h.kickAll()
			return
		case err != nil:
			h.kickAll()
			select { // go-redis dials again on the next receive
			case <-h.ctx.Done():
				return
			case <-time.After(time.Second):
			}
			continue
		}
		pinged = false
		switch m := m.(type) {
		case *redis.Subscription:
			if m.Kind == "subscribe" {
				h.notice(m.Channel)
			}
		case *redis.Message:
			h.notice(m.Channel)
		}
	}
}

// kickAll has every topic read its log.
func (h *hub) kickAll() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, t := range h.topics {
		select {
		case t.kick <- struct{}{}:
		default:
		}
	}
}

// unsubscribe drops a topic's channel, unless a newer topic of the same
// workflow has it now.
func (h *hub) unsubscribe(t *topic) {
	h.subMu.Lock()
	defer h.subMu.Unlock()
	h.mu.Lock()
	again := h.topics[t.channel] != nil
	h.mu.Unlock()
	if again || h.ps == nil || h.ctx.Err() != nil {
		return
	}
	_ = h.ps.Unsubscribe(h.ctx, t.channel)
}

// run is a topic's reader. It first anchors: notes the log's last event
// once subscribed, then has every follower that joined before read up to
// there itself; from then on it reads after its last event when kicked
// (or every safety poll) and hands what it read to the followers.
func (h *hub) run(t *topic) {
	defer h.wg.Done()
	h.subscribe(t)
	var (
		anchored bool
		cursor   string
	)
	timer := time.NewTimer(h.safety/2 + rand.N(h.safety/2+1)) // spread the topics' polls
	defer timer.Stop()
	for {
		polled := false
		select {
		case <-h.ctx.Done():
			return
		case <-t.done:
			h.unsubscribe(t)
			return
		case <-t.kick:
		case <-timer.C:
			polled = true
		}
		next := h.safety
		if !anchored {
			last, err := h.feed.Last(h.ctx, t.id)
			if err != nil {
				h.failed(t, err)
				timer.Reset(time.Second)
				continue
			}
			cursor, anchored = last, true
			h.each(t, func(f *follower) { f.anchor(cursor) })
		}
		read, err := h.readOn(t, &cursor)
		if err != nil {
			h.failed(t, err)
			next = time.Second
		} else if polled && read == 0 && cursor == "" {
			// nothing logged: the record says when it is over
			if st, err := h.feed.State(h.ctx, t.id); errors.Is(err, producer.ErrNotFound) || err == nil && record.Terminal(st) {
				h.each(t, (*follower).end)
			}
		}
		if !timer.Stop() {
			select {
			case <-timer.C:
			default:
			}
		}
		timer.Reset(next)
	}
}

// readOn reads the log after *cursor to its end and hands it out.
func (h *hub) readOn(t *topic, cursor *string) (int, error) {
	n := 0
	for {
		evs, full, err := h.feed.Page(h.ctx, t.id, *cursor)
		if err != nil {
			return n, err
		}
		if len(evs) > 0 {
			*cursor = evs[len(evs)-1].ID
			n += len(evs)
			h.each(t, func(f *follower) { f.push(evs) })
		}
		if !full {
			return n, nil
		}
	}
}

// failed ends t's streams with err: their clients resume (after their
// last event) or say so.
func (h *hub) failed(t *topic, err error) {
	if h.ctx.Err() != nil {
		return
	}
	h.log.Warn("dashboard: event streams: reading a followed log", "wf", flow.BoundID(t.id), "err", err)
	h.each(t, func(f *follower) { f.fail(err) })
}

// each applies fn to every follower of t.
func (h *hub) each(t *topic, fn func(*follower)) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for f := range t.followers {
		fn(f)
	}
}

// push hands a batch to f, unless f reads the log itself (behind) or
// holds too much already (it then does).
func (f *follower) push(evs []record.Event) {
	f.mu.Lock()
	switch {
	case f.behind:
	case f.held+len(evs) > maxPending:
		f.behind, f.pending, f.held = true, nil, 0
	default:
		f.pending, f.held = append(f.pending, evs), f.held+len(evs)
	}
	f.mu.Unlock()
	f.signal()
}

// fallBehind has f read the log itself from its last event on.
func (f *follower) fallBehind() {
	f.mu.Lock()
	f.behind, f.pending, f.held = true, nil, 0
	f.mu.Unlock()
	f.signal()
}

// anchor has f read the log itself up to its topic's first read, at
// cursor, unless it has already.
func (f *follower) anchor(cursor string) {
	f.mu.Lock()
	past := f.caught && (cursor == "" || f.read != "" && !record.EventIDBefore(f.read, cursor))
	f.mu.Unlock()
	if !past {
		f.fallBehind()
	}
}

// caughtUp notes that f read the log itself up to the event last.
func (f *follower) caughtUp(last string) {
	f.mu.Lock()
	f.caught, f.read = true, last
	f.mu.Unlock()
}

// fail tells f its topic could not read the log.
func (f *follower) fail(err error) {
	f.mu.Lock()
	f.err = err
	f.mu.Unlock()
	f.signal()
}

// end tells f its workflow is over.
func (f *follower) end() {
	f.mu.Lock()
	f.over = true
	f.mu.Unlock()
	f.signal()
}

func (f *follower) signal() {
	select {
	case f.wake <- struct{}{}:
	default:
	}
}

// take returns what f holds: the topic's batches, or behind (read the log
// itself, from now: what the topic reads meanwhile is held again), whether
// the workflow is over, and the topic's read's failure.
func (f *follower) take() (batches [][]record.Event, behind, over bool, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	batches, behind, over, err = f.pending, f.behind, f.over, f.err
	f.pending, f.held, f.behind = nil, 0, false
	return batches, behind, over, err
}
