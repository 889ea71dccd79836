package engine

import (
	dll "container/list" // named so, not list: the package may declare its own
	"sync"

	"github.com/agentq/agentq/internal/store"
)

// Bounds of the answers a worker keeps in memory when it cannot record
// them: entries and bytes of output, the least recently kept going first.
const (
	answerCacheEntries = 256
	answerCacheBytes   = 32 << 20
)

// answerKey names an answer: the same step with the same rendered input
// (route, system and prompt) gets the same answer from a checkpoint, so it
// may get this one too.
type answerKey struct {
	wf, step string
	gen      int // the run: a rerun asks again
	hash     string
}

// answerCache is a bounded LRU of answers that could not be recorded.
type answerCache struct {
	mu         sync.Mutex
	maxEntries int
	maxBytes   int
	bytes      int
	order      *dll.List // of *answerEntry, most recent first
	byKey      map[answerKey]*dll.Element
}

type answerEntry struct {
	key answerKey
	o   store.Outcome
}

func newAnswerCache(entries, bytes int) *answerCache {
	return &answerCache{maxEntries: entries, maxBytes: bytes, order: dll.New(), byKey: map[answerKey]*dll.Element{}}
}

func answerSize(o store.Outcome) int {
	return len(o.Output) + len(o.ToolCalls) + len(o.Target) + len(o.Error)
}

// put keeps o under k (replacing what k held), then drops the least
// recently used answers while over a bound. An answer larger than the
// byte bound on its own is not kept.
func (c *answerCache) put(k answerKey, o store.Outcome) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.removeLocked(k)
	if answerSize(o) > c.maxBytes {
		return
	}
	c.byKey[k] = c.order.PushFront(&answerEntry{key: k, o: o})
	c.bytes += answerSize(o)
	for c.order.Len() > c.maxEntries || c.bytes > c.maxBytes {
		c.removeLocked(c.order.Back().Value.(*answerEntry).key)
	}
}

func (c *answerCache) get(k answerKey) (store.Outcome, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.byKey[k]
	if !ok {
		return store.Outcome{}, false
	}
	c.order.MoveToFront(e)
	return e.Value.(*answerEntry).o, true
}

func (c *answerCache) remove(k answerKey) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.removeLocked(k)
}

func (c *answerCache) removeLocked(k answerKey) {
	if e, ok := c.byKey[k]; ok {
		c.bytes -= answerSize(e.Value.(*answerEntry).o)
		c.order.Remove(e)
		delete(c.byKey, k)
	}
}

// len is how many answers are kept (tests).
func (c *answerCache) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.order.Len()
}
