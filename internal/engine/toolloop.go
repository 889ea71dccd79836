package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/agentq/agentq/internal/spec"
	"github.com/agentq/agentq/llmclient"
)

// ToolCallRecord is one tool call of a step's conversation as the step
// keeps it (its tool_calls field: a JSON list of these, in the order the
// calls were made): the turn whose answer made the call, the call, and
// the result the model was given, or the error it was told instead.
type ToolCallRecord struct {
	Turn      int    `json:"turn"`
	ID        string `json:"id"`
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
	Result    string `json:"result,omitempty"`
	Error     string `json:"error,omitempty"`
	// MCP is the tool an MCP server ran, as a spec names it
	// (mcp:SERVER/TOOL); Name is what the model called it.
	MCP string `json:"mcp,omitempty"`
}

// recordFieldMax bounds each argument and result text a step keeps in its
// tool_calls (the model got the whole of it).
const recordFieldMax = 16 << 10

// toolResult is a tool call's result as the model reads it, and as it is
// kept durably.
type toolResult struct {
	Content string `json:"content"`
	IsError bool   `json:"is_error,omitempty"`
	// Started, alone, is the mark of a side-effect call that attempt
	// Started began (mcpsideeffects.go), its result not kept; Held, the
	// attempt that dead-lettered the step for it. Never in a result.
	Started int `json:"started,omitempty"`
	Held    int `json:"held,omitempty"`
}

// unsettled reports whether r is a side-effect call's mark, not a result.
func (r toolResult) unsettled() bool { return r.Started > 0 }

// maxTurnsError ends a conversation whose model still calls tools at the
// step's last turn.
type maxTurnsError struct{ turns int }

func (e *maxTurnsError) Error() string {
	return fmt.Sprintf("the model was still calling tools after %d turns (the step's max_turns)", e.turns)
}

// toolLoop is one attempt's tool conversation: the model is called, the
// tools it calls are run and their results fed back, until it answers
// with text. Every model answer and every tool result is a durable call
// (d), so an attempt after a failure or a crash replays the turns an
// earlier attempt finished instead of calling the provider or the tools
// again.
type toolLoop struct {
	d        *durable
	router   Caller
	route    string
	log      *slog.Logger
	tools    map[string]*compiledTool // the registered tools the step offers
	base     llmclient.Request        // everything but the messages
	maxTurns int
	maxBytes int  // the longest result the model is given
	stream   bool // stream each turn's text to the log (stream: true)
	mcp      MCPServers
	redact   func(string) string // the configuration's secrets out of MCP results and errors

	mu      sync.Mutex
	records []ToolCallRecord
	turns   int
}

// turnRequest is what a model call is identified by (llmclient.Request
// without what cannot be encoded: the output check).
type turnRequest struct {
	Turn        int                 `json:"turn"`
	System      string              `json:"system,omitempty"`
	Messages    []llmclient.Message `json:"messages"`
	Tools       []llmclient.Tool    `json:"tools"`
	MaxTokens   int                 `json:"max_tokens,omitempty"`
	Temperature *float64            `json:"temperature,omitempty"`
	JSON        bool                `json:"json,omitempty"`
	Schema      map[string]any      `json:"schema,omitempty"`
}

// toolCallKey is what a tool call is identified by.
type toolCallKey struct {
	Turn      int    `json:"turn"`
	ID        string `json:"id"`
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

// run holds the conversation from prompt to the model's text answer.
func (l *toolLoop) run(ctx context.Context, prompt string) (*llmclient.Response, error) {
	msgs := []llmclient.Message{{Role: llmclient.RoleUser, Content: prompt}}
	for turn := 1; ; turn++ {
		resp, err := l.chat(ctx, turn, msgs)
		if err != nil {
			return nil, err
		}
		// a tool_calls finish without calls has nothing to run: its text
		// is the answer
		if len(resp.ToolCalls) == 0 {
			return resp, nil
		}
		if turn >= l.maxTurns {
			l.note(turn, resp.ToolCalls, nil)
			return nil, &maxTurnsError{turns: turn}
		}
		results, err := l.callTools(ctx, turn, resp.ToolCalls)
		if err != nil {
			return nil, err
		}
		msgs = append(msgs, resp.AssistantMessage())
		for i, c := range resp.ToolCalls {
			msgs = append(msgs, llmclient.ToolResultMessage(c.ID, results[i].Content, results[i].IsError))
		}
	}
}

// chat is one durable model call: the answer an earlier attempt got for
// the same conversation at the same point, or the router's.
func (l *toolLoop) chat(ctx context.Context, turn int, msgs []llmclient.Message) (*llmclient.Response, error) {
	req := l.base
	req.Messages = msgs[:len(msgs):len(msgs)]
	key := turnRequest{Turn: turn, System: req.System, Messages: req.Messages, Tools: req.Tools, MaxTokens: req.MaxTokens, Temperature: req.Temperature}
	if req.Output != nil {
		key.JSON, key.Schema = true, req.Output.Schema
	}
	seq, hash, prev, err := l.d.next("llm", l.route, key)
	if err != nil {
		return nil, err
	}
	var resp *llmclient.Response
	if prev != nil {
		var r llmclient.Response
		if json.Unmarshal([]byte(prev.Value), &r) == nil {
			resp = &r
		}
	}
	if resp == nil {
		if l.stream { // the turn's text to the log as it comes; its calls whole at its end
			resp, err = streamChat(ctx, l.router, l.route, req, nil)
		} else {
			resp, err = l.router.Chat(ctx, l.route, req)
		}
		if err != nil {
			return nil, err
		}
		b, _ := json.Marshal(resp)
		if err := l.d.save(ctx, seq, hash, b); err != nil {
			return nil, err
		}
	}
	l.d.spend(resp)
	l.mu.Lock()
	l.turns = turn
	l.mu.Unlock()
	return resp, nil
}

// callTools answers every call of a turn, running the calls no earlier
// attempt answered concurrently. It returns the results in the calls'
// order, or the error that ends the conversation: a FatalToolError, a
// store that refused the attempt, or ctx ending (results made after that
// are not kept).
func (l *toolLoop) callTools(ctx context.Context, turn int, calls []llmclient.ToolCall) ([]toolResult, error) {
	results := make([]toolResult, len(calls))
	errs := make([]error, len(calls))
	type slot struct {
		seq  int
		hash string
		run  bool
	}
	slots := make([]slot, len(calls))
	var held []int // side-effect calls an earlier attempt began and never settled
	for i, c := range calls {
		// numbered here, in the calls' order, so that every attempt
		// numbers them alike whatever order they finish in
		seq, hash, prev, err := l.d.next("tool", c.Name, toolCallKey{Turn: turn, ID: c.ID, Name: c.Name, Arguments: c.Arguments})
		if err != nil {
			return nil, err
		}
		var r toolResult
		replayed := prev != nil && json.Unmarshal([]byte(prev.Value), &r) == nil
		switch {
		case replayed && r.unsettled() && r.Held == 0:
			held = append(held, i)
			results[i] = r
		case replayed && r.unsettled(): // requeued after it was held: run again
			replayed = false
		case replayed:
			results[i] = r
		}
		slots[i] = slot{seq: seq, hash: hash, run: !replayed}
	}
	if len(held) > 0 {
		return nil, l.hold(ctx, turn, calls, held, slots[held[0]].seq, slots[held[0]].hash, results[held[0]].Started)
	}
	var wg sync.WaitGroup
	for i, c := range calls {
		if !slots[i].run {
			continue
		}
		seq, hash := slots[i].seq, slots[i].hash
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := l.execute(ctx, turn, c, seq, hash)
			if err != nil {
				errs[i] = err
				if res.IsError { // what ended the attempt, for the step's record and log
					results[i] = res
				}
				return
			}
			if ctx.Err() != nil {
				errs[i] = ctx.Err() // made as the step ran out of time: not kept
				return
			}
			results[i] = res
			b, _ := json.Marshal(res)
			errs[i] = l.d.save(ctx, seq, hash, b)
		}()
	}
	// a tool that does not heed ctx does not hold the step past its time:
	// its result, whenever it comes, is neither read nor kept
	finished := make(chan struct{})
	go func() { wg.Wait(); close(finished) }()
	select {
	case <-finished:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	l.note(turn, calls, results)
	stepLogOf(ctx).toolTurn(l.refs(calls), results)
	var fatal *fatalToolError
	var unsettled *unsettledCall
	for _, err := range errs {
		if errors.As(err, &fatal) {
			return nil, err
		}
	}
	for i, err := range errs {
		if errors.As(err, &unsettled) { // held: a requeue runs it again
			mark, _ := json.Marshal(toolResult{Started: l.d.attempt, Held: l.d.attempt})
			kctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), settleTimeout)
			kerr := l.d.keep(kctx, slots[i].seq, slots[i].hash, mark)
			cancel()
			if kerr != nil {
				l.log.Warn("side-effect call held, its hold not kept: a requeue holds it again", "err", kerr.Error())
			}
			return nil, err
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return results, nil
}

// hold ends an attempt that found side-effect calls an earlier attempt
// began and never settled (held lists them): the first is marked held,
// and its step is dead-lettered for review.
func (l *toolLoop) hold(ctx context.Context, turn int, calls []llmclient.ToolCall, held []int, seq int, hash string, began int) error {
	first := calls[held[0]]
	mark, _ := json.Marshal(toolResult{Started: began, Held: l.d.attempt})
	kctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), settleTimeout)
	defer cancel()
	if err := l.d.keep(kctx, seq, hash, mark); err != nil {
		l.log.Warn("side-effect call held, its hold not kept: a requeue holds it again", "err", err.Error())
	}
	ref := first.Name
	if t := l.tools[first.Name]; t != nil && t.mcp != nil {
		ref = t.mcp.ref()
	}
	l.note(turn, calls, nil)
	return &unsettledCall{ref: ref, id: first.ID, turn: turn,
		why: fmt.Sprintf("attempt %d began it and ended before its outcome was kept (its worker stopped or died during the call)", began)}
}

// execute runs one call: its tool, if the step offers one by that name
// and the arguments match its schema. Whatever goes wrong is an error
// result for the model, except a FatalToolError, which is returned, and
// an MCP server's failure (mcpExecute). seq and hash are the call's
// durable number and hash (a side-effect call's mark goes there).
func (l *toolLoop) execute(ctx context.Context, turn int, c llmclient.ToolCall, seq int, hash string) (toolResult, error) {
	failed := func(format string, a ...any) (toolResult, error) {
		return toolResult{Content: fmt.Sprintf(format, a...), IsError: true}, nil
	}
	t := l.tools[c.Name]
	if t == nil {
		return failed("no tool named %q is run for this step (it can call %s)", c.Name, l.toolNames())
	}
	args := strings.TrimSpace(c.Arguments)
	if args == "" {
		args = "{}"
	}
	v, err := jsonschema.UnmarshalJSON(strings.NewReader(args))
	if err != nil {
		return failed("the arguments of %s are not JSON: %s", c.Name, spec.OneLine(err.Error()))
	}
	if err := t.schema.Validate(v); err != nil {
		return failed("the arguments of %s do not match its schema: %s", c.Name, spec.OneLine(spec.ValidationText(err)))
	}
	if t.mcp != nil {
		return l.mcpExecute(ctx, turn, c, t.mcp, json.RawMessage(args), seq, hash)
	}
	out, err := callTool(ctx, t.fn, json.RawMessage(args))
	var fatal *fatalToolError
	var pe *PanicError
	switch {
	case errors.As(err, &fatal):
		return toolResult{}, fmt.Errorf("tool %s (turn %d, call %s) failed: %w", c.Name, turn, c.ID, err)
	case errors.As(err, &pe):
		l.log.Error("tool panicked", "tool", c.Name, "turn", turn, "call", c.ID, "panic", fmt.Sprint(pe.Value), "stack", string(pe.Stack))
		return failed("the tool %s panicked: %v", c.Name, pe.Value)
	case err != nil:
		return failed("%s", err.Error())
	}
	content, err := toolContent(out)
	if err != nil {
		return failed("%s: %s", c.Name, err.Error())
	}
	if len(content) > l.maxBytes {
		return failed("the result of %s is %d bytes, over the %d-byte limit", c.Name, len(content), l.maxBytes)
	}
	return toolResult{Content: strings.ToValidUTF8(content, "\uFFFD")}, nil
}

// toolNames lists the tools the step runs, for an error result.
func (l *toolLoop) toolNames() string {
	var names []string
	for _, t := range l.base.Tools {
		if l.tools[t.Name] != nil {
			names = append(names, t.Name)
		}
	}
	return strings.Join(names, ", ")
}

// note keeps a turn's calls and their results (nil: not run) for the
// step's tool_calls.
func (l *toolLoop) note(turn int, calls []llmclient.ToolCall, results []toolResult) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for i, c := range calls {
		r := ToolCallRecord{Turn: turn, ID: c.ID, Name: c.Name, Arguments: excerptText(c.Arguments)}
		if t := l.tools[c.Name]; t != nil && t.mcp != nil {
			r.MCP = t.mcp.ref()
		}
		switch {
		case results == nil && l.turns >= l.maxTurns:
			r.Error = "not run: the step's max_turns was reached"
		case results == nil || results[i].unsettled():
			r.Error = "not run: a side-effect call's outcome is unknown"
		case results[i].IsError:
			r.Error = excerptText(results[i].Content)
		default:
			r.Result = excerptText(results[i].Content)
		}
		l.records = append(l.records, r)
	}
}

// recordJSON is the step's tool_calls: every call with its result.
func (l *toolLoop) recordJSON() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.records) == 0 {
		return ""
	}
	b, _ := json.Marshal(l.records)
	return string(b)
}

func excerptText(s string) string {
	if len(s) <= recordFieldMax {
		return s
	}
	return strings.ToValidUTF8(s[:recordFieldMax], "") + fmt.Sprintf("… (%d bytes)", len(s))
}
