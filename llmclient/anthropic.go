package llmclient

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	anthropic "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/anthropics/anthropic-sdk-go/v2/packages/ssestream"
)

// anthropicProvider is an adapter for the Anthropic Messages API, built on the
// official SDK with its own retries switched off, its environment defaults
// (ANTHROPIC_API_KEY, profiles) ignored: keys come only from our
// configuration, and its own OpenTelemetry spans off whatever the
// ANTHROPIC_OPEN_TELEMETRY* variables say: agentq's span of the call is
// the one, and it carries no prompt or answer text (the SDK's span would,
// in its content mode).
type anthropicProvider struct {
	base
	clients []anthropic.Client // one per key
}

// newAnthropic builds the adapter. It makes no network call. BaseURL, when
// set, is the API root without /v1 (the SDK appends v1/messages).
func newAnthropic(o Options) (*anthropicProvider, error) {
	if err := o.validate(); err != nil {
		return nil, err
	}
	a := &anthropicProvider{base: newBase(o)}
	hc := newHTTPClient(o.transport(), a.maxAnswer)
	for _, k := range o.Keys {
		opts := []option.RequestOption{
			option.WithoutEnvironmentDefaults(),
			option.WithAPIKey(k),
			option.WithMaxRetries(0),
			option.WithHTTPClient(hc),
			option.WithoutOpenTelemetry(), // wins over the environment
		}
		if o.BaseURL != "" {
			opts = append(opts, option.WithBaseURL(o.BaseURL))
		}
		a.clients = append(a.clients, anthropic.NewClient(opts...))
	}
	return a, nil
}

func (a *anthropicProvider) params(req Request) anthropic.MessageNewParams {
	p := anthropic.MessageNewParams{Model: anthropic.Model(req.Model), MaxTokens: int64(req.maxTokens())}
	if req.System != "" {
		p.System = []anthropic.TextBlockParam{{Text: req.System}}
	}
	for _, t := range req.Tools {
		schema := anthropic.ToolInputSchemaParam{ExtraFields: map[string]any{}}
		for k, v := range t.Parameters {
			switch k {
			case "type":
			case "properties":
				schema.Properties = v
			case "required":
				schema.Required = append(schema.Required, asStrings(v)...)
			default:
				schema.ExtraFields[k] = v
			}
		}
		tp := anthropic.ToolParam{Name: t.Name, InputSchema: schema}
		if t.Description != "" {
			tp.Description = anthropic.String(t.Description)
		}
		p.Tools = append(p.Tools, anthropic.ToolUnionParam{OfTool: &tp})
	}
	if o := req.Output; o != nil && o.Schema != nil {
		p.OutputConfig = anthropic.OutputConfigParam{Format: anthropic.JSONOutputFormatParam{Schema: o.Schema}}
	}
	p.Messages = anthropicMessages(req.Messages)
	return p
}

// opts are the per-request options params cannot carry: this SDK version
// has no temperature field, so it is set in the JSON body.
func (a *anthropicProvider) opts(req Request) []option.RequestOption {
	if req.Temperature == nil {
		return nil
	}
	return []option.RequestOption{option.WithJSONSet("temperature", *req.Temperature)}
}

// Chat implements Provider.
func (a *anthropicProvider) Chat(ctx context.Context, req Request) (*Response, error) {
	k := a.keyIndex(ctx)
	cctx, c := withCapture(ctx)
	start := a.now()
	msg, err := a.clients[k].Messages.New(cctx, a.params(req), a.opts(req)...)
	if err != nil {
		return nil, a.toError(ctx, req.Model, k, c, err, parseAnthropicError)
	}
	if msg.Type != "message" {
		// a 200 that carries an error document (or something else entirely)
		raw := msg.RawJSON()
		e := a.toError(ctx, req.Model, k, c, errors.New("200 answer is not a message"), parseAnthropicError)
		e.InStream = true
		if code, typ, m := parseErrorBody([]byte(raw)); typ != "" {
			e.Code, e.Type, e.Message = a.red.Truncate(code, 128), a.red.Truncate(typ, 128), a.red.Truncate(m, bodyExcerptLimit)
		} else {
			e.Type = TypeMalformed
		}
		e.Body = a.red.Truncate(raw, bodyExcerptLimit)
		return nil, e
	}
	var text strings.Builder
	var calls []ToolCall
	for _, b := range msg.Content {
		switch b.Type {
		case "text":
			text.WriteString(b.Text)
		case "tool_use":
			calls = append(calls, ToolCall{ID: b.ID, Name: b.Name, Arguments: a.red.String(string(b.Input))})
		}
	}
	if text.Len() == 0 && len(calls) == 0 {
		return nil, a.toError(ctx, req.Model, k, c, errEmptyAnswer, parseAnthropicError)
	}
	_, h, _ := c.snapshot()
	return &Response{
		ToolCalls:     calls,
		FinishReason:  anthropicFinish(msg.StopReason),
		ResponseModel: a.red.Truncate(string(msg.Model), 128),
		Text:          a.red.String(text.String()), // a provider may echo a key in its answer
		Usage:         Usage{PromptTokens: int(msg.Usage.InputTokens), CompletionTokens: int(msg.Usage.OutputTokens)},
		Provider:      a.name,
		Model:         req.Model,
		Key:           a.fps[k],
		Latency:       a.now().Sub(start),
		RequestID:     requestID(h),
	}, nil
}

// ChatStream implements Provider.
func (a *anthropicProvider) ChatStream(ctx context.Context, req Request) (*Stream, error) {
	k := a.keyIndex(ctx)
	sctx, cancel := context.WithCancel(ctx)
	cctx, c := withCapture(sctx)
	onErr := func(err error) error { return a.toError(sctx, req.Model, k, c, err, parseAnthropicError) }
	var usage Usage
	var finish string
	var st *ssestream.Stream[anthropic.MessageStreamEventUnion]
	var calls []ToolCall
	blocks := map[int64]int{} // a tool_use block's index -> its call
	src := func() (string, *Response, error) {
		for st.Next() {
			ev := st.Current()
			switch ev.Type {
			case "content_block_start":
				if ev.ContentBlock.Type == "tool_use" {
					if len(calls) >= maxStreamedToolCalls {
						return "", nil, fmt.Errorf("over %d streamed tool calls", maxStreamedToolCalls)
					}
					blocks[ev.Index] = len(calls)
					calls = append(calls, ToolCall{ID: ev.ContentBlock.ID, Name: ev.ContentBlock.Name})
				}
			case "message_start":
				usage.PromptTokens = int(ev.Message.Usage.InputTokens)
				usage.CompletionTokens = int(ev.Message.Usage.OutputTokens)
			case "content_block_delta":
				if i, ok := blocks[ev.Index]; ok && ev.Delta.Type == "input_json_delta" {
					if calls[i].Arguments += ev.Delta.PartialJSON; len(calls[i].Arguments) > maxToolArgumentBytes {
						return "", nil, fmt.Errorf("a streamed tool call's arguments are over %d bytes", maxToolArgumentBytes)
					}
					return "", nil, nil // no text, but the stream is alive (its stall limit)
				}
				if ev.Delta.Text != "" {
					return ev.Delta.Text, nil, nil
				}
			case "message_delta":
				if ev.Delta.StopReason != "" {
					finish = anthropicFinish(ev.Delta.StopReason)
				}
				usage.CompletionTokens = int(ev.Usage.OutputTokens)
				if ev.Usage.InputTokens > 0 {
					usage.PromptTokens = int(ev.Usage.InputTokens)
				}
			case "message_stop":
				_, h, _ := c.snapshot()
				for i := range calls {
					if calls[i].Arguments == "" {
						calls[i].Arguments = "{}" // a tool that takes nothing
					}
					calls[i].Arguments = a.red.String(calls[i].Arguments)
				}
				return "", &Response{Usage: usage, FinishReason: finish, Provider: a.name, Model: req.Model, Key: a.fps[k], RequestID: requestID(h),
					ToolCalls: calls}, nil
			}
		}
		if err := st.Err(); err != nil {
			return "", nil, err
		}
		return "", nil, ErrStreamTruncated
	}
	open := func() (streamSource, func(), error) {
		st = a.clients[k].Messages.NewStreaming(cctx, a.params(req), a.opts(req)...)
		return src, func() { st.Close() }, nil
	}
	return newStream(sctx, cancel, req.StallTimeout, a.now, a.red, open, onErr), nil
}

// Probe makes the cheapest authenticated call (list models) with the key
// chosen by ctx (WithKey): it tells a rejected key from a failing server.
func (a *anthropicProvider) Probe(ctx context.Context) error {
	k := a.keyIndex(ctx)
	cctx, c := withCapture(ctx)
	if _, err := a.clients[k].Models.List(cctx, anthropic.ModelListParams{}); err != nil {
		return a.toError(ctx, "models", k, c, err, parseAnthropicError)
	}
	return nil
}

// streamErrorPrefix is how the SDK reports an error event it could not turn
// into an *anthropic.Error.
const streamErrorPrefix = "received error while streaming: "

func parseAnthropicError(err error) sdkError {
	var s sdkError
	var ae *anthropic.Error
	if errors.As(err, &ae) {
		s.status = ae.StatusCode
		s.typ = string(ae.Type())
		s.code = string(ae.ErrorCode())
		s.message = ae.Message
		s.requestID = ae.RequestID
		s.rawBody = ae.RawJSON()
		if ae.Response != nil && ae.StatusCode < 400 {
			s.status, s.inStream = 0, true
		}
		return s
	}
	if msg := err.Error(); strings.HasPrefix(msg, streamErrorPrefix) {
		body := strings.TrimPrefix(msg, streamErrorPrefix)
		s.inStream = true
		s.rawBody = body
		var env struct {
			Error struct{ Type, Message string } `json:"error"`
		}
		if json.Unmarshal([]byte(body), &env) == nil {
			s.typ, s.message = env.Error.Type, env.Error.Message
		}
	}
	return s
}

var _ Provider = (*anthropicProvider)(nil)

// asStrings reads a JSON Schema "required" list.
func asStrings(v any) []string {
	switch v := v.(type) {
	case []string:
		return v
	case []any:
		out := make([]string, 0, len(v))
		for _, x := range v {
			if s, ok := x.(string); ok {
				out = append(out, s)
			}
		}
		return out
	}
	return nil
}
