package engine_test

import (
	"strings"
	"testing"
	"time"

	"github.com/agentq/agentq/internal/chaosllm"
	"github.com/agentq/agentq/internal/poll"
	"github.com/agentq/agentq/internal/record"
	"github.com/agentq/agentq/internal/store"
	"github.com/agentq/agentq/internal/testenv"
)

// slowWords is a short answer (far under any hold for redaction) that
// chaosllm streams a word every slowEvery.
const (
	slowWords = "one two three four five six seven eight nine ten eleven twelve"
	slowEvery = 300 * time.Millisecond
)

// A stream's text reaches the event log while it streams: the first
// step.delta is in the log before the provider has sent its last chunk,
// on both dialects, and the deltas still join to the stored output.
func TestStreamedTextIsLoggedWhileItStreams(t *testing.T) {
	e := testenv.Start(t, testenv.Options{Scenario: chaosllm.Scenario{
		Answers: []chaosllm.Answer{{Match: "slowly", Text: slowWords}},
		Phases:  []chaosllm.Phase{{ChunkEvery: chaosllm.Duration(slowEvery)}},
	}})
	words := len(strings.Fields(slowWords))
	for _, c := range []struct{ route, endpoint string }{{"solo", "openai"}, {"limited", "anthropic"}} {
		t.Run(c.endpoint, func(t *testing.T) {
			before := e.Chaos.Snapshot().StreamChunks[c.endpoint]
			id := e.Submit(t, e.Spec(`
name: live
steps:
  - { id: s, route: `+c.route+`, prompt: "answer slowly", stream: true }
`))
			var sentWhenSeen int
			poll.Until(t, 10*time.Second, func() (bool, string) {
				// the log first, then what the provider had sent: a delta
				// seen with chunks still to come was logged before them
				if countEvents(t, e, id, "s", record.EventDelta) == 0 {
					return false, "no step.delta in the log yet"
				}
				sentWhenSeen = e.Chaos.Snapshot().StreamChunks[c.endpoint] - before
				return true, ""
			})
			if sentWhenSeen >= words {
				t.Errorf("the first step.delta was seen after the provider had sent all %d chunks: the text did not stream", words)
			}
			wf := e.Wait(t, id, 15*time.Second, store.StateCompleted)
			text, resets := streamedText(t, e, id, "s")
			if text != wf.Steps[0].Output || text != slowWords || resets != 0 {
				t.Fatalf("the deltas join to %q (%d resets), the output is %q", text, resets, wf.Steps[0].Output)
			}
			deltas := eventsOf(t, e, id, "s", record.EventDelta)
			calls := eventsOf(t, e, id, "s", record.EventLLMCall)
			if len(deltas) < 3 || len(calls) != 1 {
				t.Fatalf("%d deltas and %d llm calls: the text did not stream", len(deltas), len(calls))
			}
			// the first words were logged about the whole stream's time
			// before the call ended
			lead := calls[0].At.Sub(deltas[0].At)
			if lead < time.Duration(words/2)*slowEvery {
				t.Errorf("the first delta came %v before the call's end; the stream took %v", lead, time.Duration(words-1)*slowEvery)
			}
			t.Logf("%d chunks sent when the first delta was seen; %d deltas in %d log entries; the first %v before the call's end",
				sentWhenSeen, len(deltas), entriesOf(t, deltas), lead)
		})
	}
}

// A fast stream is logged in a write every deltaEvery (100 ms), not one
// a chunk, and one that answers within it rides with the outcome.
func TestAFastStreamIsLoggedInFewWrites(t *testing.T) {
	const (
		n     = 200
		every = 5 * time.Millisecond // a second's stream, a chunk each 5 ms
	)
	fast := strings.Repeat("word ", n)
	e := testenv.Start(t, testenv.Options{Scenario: chaosllm.Scenario{
		Answers:   []chaosllm.Answer{{Match: "paced", Text: fast}, {Match: "at once", Text: "a short answer sent all at once"}},
		Timelines: []chaosllm.Timeline{{Endpoint: "openai", Phases: []chaosllm.Phase{{ChunkEvery: chaosllm.Duration(every)}}}},
	}})
	id := e.Submit(t, e.Spec(`
name: fast
steps:
  - { id: paced, route: solo, prompt: "paced", stream: true }
  - { id: quick, route: limited, prompt: "at once", stream: true }
`))
	e.Wait(t, id, 15*time.Second, store.StateCompleted)
	deltas := eventsOf(t, e, id, "paced", record.EventDelta)
	text, _ := streamedText(t, e, id, "paced")
	entries := entriesOf(t, deltas)
	// about a second at a write each 100 ms, and the last with the
	// outcome; slow test machines stretch the stream, so the bound is a
	// chunk's share, not the ideal 11
	if text != fast || entries < 3 || entries > n/5 {
		t.Fatalf("%d chunks logged in %d deltas, %d log entries (want a few, one each 100 ms); text whole: %v", n, len(deltas), entries, text == fast)
	}
	t.Logf("%d chunks 5 ms apart: %d log entries of deltas", n, entries)
	quick := eventsOf(t, e, id, "quick", record.EventDelta)
	done := eventsOf(t, e, id, "quick", record.EventDone)
	if len(quick) != 1 || len(done) != 1 || entriesOf(t, append(quick, done...)) != 1 {
		t.Fatalf("a stream answered at once: %d deltas, not in its outcome's entry (%v)", len(quick), append(quick, done...))
	}
}

// entriesOf is how many log entries (writes) hold evs.
func entriesOf(t *testing.T, evs []record.Event) int {
	t.Helper()
	seen := map[string]bool{}
	for _, ev := range evs {
		entry, _, ok := record.SplitEventID(ev.ID)
		if !ok {
			t.Fatalf("event id %q", ev.ID)
		}
		seen[entry] = true
	}
	return len(seen)
}

// A stream that dies midway after its first words were logged is retried
// on the route's only target: the reader drops the first attempt's text
// (step.stream_reset) and joins the second's to the stored output, once.
func TestARetriedStreamIsNotLoggedTwice(t *testing.T) {
	e := testenv.Start(t, testenv.Options{Scenario: chaosllm.Scenario{
		Answers: []chaosllm.Answer{{Match: "slowly", Text: slowWords}},
		Timelines: []chaosllm.Timeline{{Endpoint: "openai", Phases: []chaosllm.Phase{
			{Requests: 1, ChunkEvery: chaosllm.Duration(slowEvery), Fault: &chaosllm.Fault{Kind: chaosllm.KindReset, Chunks: 4}},
			{ChunkEvery: chaosllm.Duration(50 * time.Millisecond)}}}},
	}})
	id := e.Submit(t, e.Spec(`
name: retried
steps:
  - { id: s, route: solo, prompt: "answer slowly", stream: true }
`))
	wf := e.Wait(t, id, 30*time.Second, store.StateCompleted)
	s := wf.Steps[0]
	text, resets := streamedText(t, e, id, "s")
	if s.Attempts < 2 || text != s.Output || s.Output != slowWords || resets < 1 {
		t.Fatalf("attempts %d, %d resets, the deltas after the last join to %q, the output is %q", s.Attempts, resets, text, s.Output)
	}
	first := 0
	for _, d := range eventsOf(t, e, id, "s", record.EventDelta) {
		if d.Attempt == 1 {
			first++
		}
	}
	if first == 0 {
		t.Fatalf("the first attempt logged no text before it failed: the test shows nothing")
	}
}
