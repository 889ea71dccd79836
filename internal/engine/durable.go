package engine

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"

	"github.com/agentq/agentq/internal/flow"
	"github.com/agentq/agentq/internal/store"
	"github.com/agentq/agentq/llmclient"
)

// durable numbers a code step's sub-calls (its LLM calls and Do
// operations, in the order the code makes them) and keeps each answer in
// the store, so that an attempt after a failure, a crash or a lease expiry
// gets the answers of the calls an earlier attempt finished instead of
// making them again. A call is identified by its sequence number and the
// hash of what it asks: code that asks something else at the same point
// (it is not deterministic) gets a fresh call, never a wrong answer.
type durable struct {
	wf, step string
	gen      int // the workflow's run: an earlier run's late answer is refused
	attempt  int
	st       callStore
	log      *slog.Logger

	mu     sync.Mutex
	seq    int
	stored map[int]store.Call
	// counts, for the step's log line and tests
	replayed, made int
	// what the answers the step used cost (spend), made now or by an
	// earlier attempt; prices, by target, price each (nil: none)
	prices map[string]flow.Price
	usage  llmclient.Usage
	cost   int64 // millionths of the prices' currency
}

// spend counts an answer the step uses toward its usage and cost, each
// priced by its own target (a fallback may have answered), whether this
// attempt made the call or an earlier one did: the record says what the
// answers it holds cost.
func (d *durable) spend(resp *llmclient.Response) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.usage.PromptTokens += resp.Usage.PromptTokens
	d.usage.CompletionTokens += resp.Usage.CompletionTokens
	d.cost += costMicros(d.prices, resp.Provider+"/"+resp.Model, resp.Usage.PromptTokens, resp.Usage.CompletionTokens)
}

// spent is what spend counted: the usage and the cost.
func (d *durable) spent() (store.Usage, int64) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return store.Usage{PromptTokens: d.usage.PromptTokens, CompletionTokens: d.usage.CompletionTokens}, d.cost
}

// next takes the next sequence number for a call of kind and name asking
// req, and returns what an earlier attempt stored for it, if it asked the
// same.
func (d *durable) next(kind, name string, req any) (seq int, hash string, prev *store.Call, err error) {
	b, err := json.Marshal(req)
	if err != nil {
		return 0, "", nil, fmt.Errorf("durable %s %q: the request cannot be encoded as JSON: %w", kind, name, err)
	}
	h := sha256.New()
	fmt.Fprintf(h, "%s\x00%s\x00", kind, name)
	h.Write(b)
	hash = hex.EncodeToString(h.Sum(nil))[:32]
	d.mu.Lock()
	defer d.mu.Unlock()
	seq = d.seq
	d.seq++
	if c, ok := d.stored[seq]; ok {
		if c.Hash == hash {
			d.replayed++
			return seq, hash, &c, nil
		}
		d.log.Warn("durable call differs from the one an earlier attempt made at this point: making it again (is the step's code deterministic?)",
			"seq", seq, "kind", kind, "name", name)
	}
	d.made++
	return seq, hash, nil, nil
}

// save stores a call's answer for this attempt. A later attempt having
// taken the step is an error (this attempt's work is void); Redis being
// away is not: the answer is tried for as long as the step's lease may
// still be this worker's (answerContext), then used, only not kept.
func (d *durable) save(ctx context.Context, seq int, hash string, value []byte) error {
	actx, cancel := answerContext(ctx)
	defer cancel()
	err := untilStored(actx, func() error {
		return d.st.SaveCall(actx, d.wf, d.step, d.gen, d.attempt, seq, store.Call{Hash: hash, Value: string(value)})
	})
	switch {
	case err == nil:
		return nil
	case errors.Is(err, store.ErrStaleAttempt), errors.Is(err, store.ErrNotFound):
		return err
	case errors.Is(err, store.ErrNotConfirmed):
		// kept on the primary; the step's settle, later in the same
		// primary's stream, is confirmed or not in its turn
		d.log.Warn("durable call kept but not confirmed by the replicas: should a failover lose it, a retry of this step makes it again", "seq", seq)
		return nil
	}
	d.log.Warn("durable call answered but not kept: a retry of this step will make it again", "seq", seq, "err", store.Excerpt(err.Error()))
	return nil
}

// callStore keeps durable sub-calls: the store in a worker, memory in a
// test (TestStep).
type callStore interface {
	SaveCall(ctx context.Context, wf, step string, gen, attempt, seq int, c store.Call) error
}

// LLM is a code step's way to the model: the worker's router (failover,
// keys, breakers, limits, hedging, structured output), with every answer
// kept durably.
type LLM struct {
	d      *durable
	router Caller
}

// Chat sends req along the named route, or returns the answer an earlier
// attempt of this step got for the same request at the same point.
// Failures are not kept: a retried step asks again.
func (l *LLM) Chat(ctx context.Context, route string, req llmclient.Request) (*llmclient.Response, error) {
	return l.ask(ctx, route, req, nil, func() (*llmclient.Response, error) { return l.router.Chat(ctx, route, req) })
}

// Stream is Chat with the answer's text streamed: onDelta (nil: none)
// gets each piece as it comes, and the workflow's event log its
// step.delta events (followers see the text being written). When the
// stream fails over midway the text starts again (the log says
// step.stream_reset; onDelta gets the new target's text from its start).
// The answer returned, and kept durably, is the final one, whole; an
// answer an earlier attempt kept is handed to onDelta in one piece.
func (l *LLM) Stream(ctx context.Context, route string, req llmclient.Request, onDelta func(delta string)) (*llmclient.Response, error) {
	return l.ask(ctx, route, req, onDelta, func() (*llmclient.Response, error) { return streamChat(ctx, l.router, route, req, onDelta) })
}

// ask is one durable LLM call: the answer kept for it (handed to replayed,
// when set, as one piece), else call's, kept.
func (l *LLM) ask(ctx context.Context, route string, req llmclient.Request, replayed func(string), call func() (*llmclient.Response, error)) (*llmclient.Response, error) {
	seq, hash, prev, err := l.d.next("llm", route, req)
	if err != nil {
		return nil, err
	}
	if prev != nil {
		var r llmclient.Response
		if err := json.Unmarshal([]byte(prev.Value), &r); err == nil {
			l.d.spend(&r)
			if replayed != nil {
				replayed(r.Text)
			}
			return &r, nil
		}
	}
	resp, err := call()
	if err != nil {
		return nil, err
	}
	l.d.spend(resp)
	b, _ := json.Marshal(resp)
	if err := l.d.save(ctx, seq, hash, b); err != nil {
		return nil, err
	}
	return resp, nil
}

// Do runs fn once per step, durably: its result (JSON-encoded) is kept
// under the step's next sequence number, so an attempt after a failure
// returns it without running fn again. name tells calls apart in logs and
// in the hash; give every distinct operation its own. fn's errors are not
// kept. Go methods cannot have type parameters, so Do is a function.
func Do[T any](ctx context.Context, s *CodeStep, name string, fn func(ctx context.Context) (T, error)) (T, error) {
	var zero T
	seq, hash, prev, err := s.d.next("do", name, name)
	if err != nil {
		return zero, err
	}
	if prev != nil {
		var v T
		if err := json.Unmarshal([]byte(prev.Value), &v); err == nil {
			return v, nil
		}
	}
	v, err := fn(ctx)
	stepLogOf(ctx).do(name, err)
	if err != nil {
		return zero, err
	}
	b, err := json.Marshal(v)
	if err != nil {
		return zero, fmt.Errorf("durable do %q: its result cannot be kept as JSON: %w", name, err)
	}
	if err := s.d.save(ctx, seq, hash, b); err != nil {
		return zero, err
	}
	return v, nil
}
