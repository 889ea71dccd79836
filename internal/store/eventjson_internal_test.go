package store

import (
	"encoding/json"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/agentq/agentq/internal/record"
)

// The log's events are written by appendEventJSON byte for byte as
// encoding/json writes them.
func TestEventJSONIsEncodingJSONs(t *testing.T) {
	at := time.Date(2026, 12, 7, 1, 30, 15, 337399621, time.UTC)
	next := at.Add(1500 * time.Millisecond).In(time.FixedZone("x", 3600))
	texts := []string{"", "plain", `a "quoted" \ back`, "<b>&amp;</b>", "line\nbreak\ttab\x01", "é ü 漢字 🙂", "\u2028\u2029", "bad \xff utf-8", "caf\xc3"}
	events := []Event{
		{},
		{Type: record.EventSubmitted, At: at, Name: "bench-chain"},
		{Type: record.EventStarted, Step: "s0", Attempt: 1, At: at, Worker: "vm-7280-5c35e5b4"},
		{Type: record.EventLLMCall, Step: "s0", Attempt: 2, At: at.In(time.FixedZone("y", -5*3600)), Route: "bench", Target: "chaos/bench-model", Provider: "chaos",
			Key: "chaos#1 (…-key)", LatencyMS: 12, PromptTokens: 12, CompletionTokens: 9, CostUSD: 0.000123},
		{Type: record.EventFailed, Step: "m[3]", Attempt: 3, At: at, Class: "server", Reason: "HTTP 500: <html>", NextAttemptAt: &next},
		{Type: record.EventRerun, At: at, Gen: 2, Steps: []string{"a", "b<c>"}},
		{Type: record.EventToolTurn, At: at, Tools: []string{"search", "fetch"}, Error: "search: \"nope\""},
		{Type: record.EventTruncated, At: at, Dropped: 12345},
		{Type: record.EventDone, At: at, CostUSD: 1e-7},
		{Type: record.EventDone, At: at, CostUSD: 2.5e21},
		{Type: record.EventDone, At: at, CostUSD: 12.75, ID: "1796607015129-0.2"},
	}
	r := rand.New(rand.NewPCG(1, 2))
	pick := func() string { return texts[r.IntN(len(texts))] }
	for range 500 {
		events = append(events, Event{Type: pick(), Step: pick(), Attempt: r.IntN(3), At: at.Add(time.Duration(r.Int64N(1e12))), Name: pick(), State: pick(),
			Worker: pick(), Class: pick(), Reason: pick(), Route: pick(), Target: pick(), Provider: pick(), Key: pick(), Error: pick(),
			Text: pick(), Prompt: pick(), Answer: pick(), CostUSD: float64(r.IntN(3)) * r.Float64() / 1000, Steps: []string{pick()}[:r.IntN(2)]})
	}
	for _, e := range events {
		want, err := json.Marshal(e)
		if err != nil {
			t.Fatal(err)
		}
		if got := appendEventJSON(nil, &e); string(got) != string(want) {
			t.Errorf("event %+v:\n got %s\nwant %s", e, got, want)
		}
	}
}
