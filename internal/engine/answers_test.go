package engine

import (
	"strings"
	"testing"

	"github.com/agentq/agentq/internal/store"
)

// The answers a worker keeps in memory are bounded in number and bytes;
// the least recently used go first, and one too big is not kept.
func TestAnswerCacheIsBounded(t *testing.T) {
	c := newAnswerCache(3, 100)
	k := func(i int) answerKey { return answerKey{wf: "wf", step: string(rune('a' + i)), hash: "h"} }
	for i := 0; i < 3; i++ {
		c.put(k(i), store.Outcome{Done: true, Output: strings.Repeat("x", 20)})
	}
	if _, ok := c.get(k(0)); !ok { // a is now the most recently used
		t.Fatal("a was not kept")
	}
	c.put(k(3), store.Outcome{Output: strings.Repeat("y", 20)}) // over 3 entries: b goes
	if _, ok := c.get(k(1)); ok || c.len() != 3 {
		t.Fatalf("b kept, or %d entries; want b dropped, 3 kept", c.len())
	}
	c.put(k(4), store.Outcome{Output: strings.Repeat("z", 70)}) // over 100 bytes: c, then a go
	if _, ok := c.get(k(2)); ok {
		t.Fatal("c kept past the byte bound")
	}
	if _, ok := c.get(k(0)); ok {
		t.Fatal("a kept past the byte bound")
	}
	if c.len() != 2 || c.bytes != 90 {
		t.Fatalf("%d entries, %d bytes; want d and e, 90 bytes", c.len(), c.bytes)
	}
	c.put(k(5), store.Outcome{Output: strings.Repeat("!", 101)}) // too big alone
	if _, ok := c.get(k(5)); ok || c.len() != 2 {
		t.Fatal("an answer over the byte bound was kept")
	}
	c.remove(k(3))
	if _, ok := c.get(k(3)); ok || c.bytes != 70 {
		t.Fatalf("remove left %d bytes", c.bytes)
	}
	// the same key replaces its answer
	c.put(k(4), store.Outcome{Output: "short"})
	if o, _ := c.get(k(4)); o.Output != "short" || c.bytes != 5 || c.len() != 1 {
		t.Fatalf("replaced: %q, %d bytes, %d entries", o.Output, c.bytes, c.len())
	}
}
