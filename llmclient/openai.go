package llmclient

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	openai "github.com/sashabaranov/go-openai"
)

// openaiProvider is an adapter for any OpenAI-compatible chat completions endpoint
// (OpenAI, xAI, vLLM, LM Studio, Ollama's /v1), built on go-openai.
type openaiProvider struct {
	base
	clients []*openai.Client // one per key
}

// newOpenAI builds the adapter. It makes no network call.
func newOpenAI(o Options) (*openaiProvider, error) {
	if err := o.validate(); err != nil {
		return nil, err
	}
	a := &openaiProvider{base: newBase(o)}
	hc := newHTTPClient(o.transport(), a.maxAnswer)
	for _, k := range o.Keys {
		cfg := openai.DefaultConfig(k)
		if o.BaseURL != "" {
			cfg.BaseURL = o.BaseURL
		}
		cfg.HTTPClient = hc
		a.clients = append(a.clients, openai.NewClientWithConfig(cfg))
	}
	return a, nil
}

func (a *openaiProvider) request(req Request, stream bool) openai.ChatCompletionRequest {
	r := openai.ChatCompletionRequest{Model: req.Model, Stream: stream}
	// max_tokens, not max_completion_tokens: every OpenAI-compatible server
	// (vLLM, Ollama, LM Studio, xAI) accepts it; OpenAI still does for chat models.
	//lint:ignore SA1019 deliberate, see above
	r.MaxTokens = req.maxTokens()
	if req.System != "" {
		r.Messages = append(r.Messages, openai.ChatCompletionMessage{Role: openai.ChatMessageRoleSystem, Content: req.System})
	}
	r.Messages = append(r.Messages, openAIMessages(req.Messages)...)
	if stream {
		r.StreamOptions = &openai.StreamOptions{IncludeUsage: true}
	}
	if req.Temperature != nil {
		r.Temperature = float32(*req.Temperature)
	}
	for _, t := range req.Tools {
		r.Tools = append(r.Tools, openai.Tool{Type: openai.ToolTypeFunction, Function: &openai.FunctionDefinition{
			Name: t.Name, Description: t.Description, Parameters: t.Parameters}})
	}
	if o := req.Output; o != nil {
		if o.Schema == nil {
			r.ResponseFormat = &openai.ChatCompletionResponseFormat{Type: openai.ChatCompletionResponseFormatTypeJSONObject}
		} else {
			name := o.Name
			if name == "" {
				name = "output"
			}
			// not strict: OpenAI's strict mode accepts only a subset of JSON
			// Schema (every property required, no additionalProperties);
			// agentq validates every answer against the whole schema anyway
			r.ResponseFormat = &openai.ChatCompletionResponseFormat{Type: openai.ChatCompletionResponseFormatTypeJSONSchema,
				JSONSchema: &openai.ChatCompletionResponseFormatJSONSchema{Name: name, Schema: schemaJSON(o.Schema)}}
		}
	}
	return r
}

// schemaJSON is a schema as go-openai wants it (a json.Marshaler).
type schemaJSON map[string]any

func (s schemaJSON) MarshalJSON() ([]byte, error) { return json.Marshal(map[string]any(s)) }

// Chat implements Provider. The call waits, for as long as the provider
// takes, at the bottom of a worker's deepest stack, so what is built
// before it and read after it is done in functions of their own (their
// frames are gone while it waits): a goroutine's stack is sized by its
// deepest moment, and a worker holds one such stack per call in flight.
func (a *openaiProvider) Chat(ctx context.Context, req Request) (*Response, error) {
	k := a.keyIndex(ctx)
	cctx, c := withCapture(ctx)
	start := a.now()
	resp, err := a.send(cctx, k, a.chatRequest(&req))
	if err != nil {
		return nil, a.toError(ctx, req.Model, k, c, err, parseOpenAIError)
	}
	return a.response(ctx, &req, k, c, resp, start)
}

// chatRequest is request(req, false) on the heap.
//
//go:noinline
func (a *openaiProvider) chatRequest(req *Request) *openai.ChatCompletionRequest {
	r := a.request(*req, false)
	return &r
}

// send makes the call with key k.
//
//go:noinline
func (a *openaiProvider) send(ctx context.Context, k int, r *openai.ChatCompletionRequest) (*openai.ChatCompletionResponse, error) {
	resp, err := a.clients[k].CreateChatCompletion(ctx, *r)
	if err != nil {
		return nil, err
	}
	return &resp, nil
}

// response is the call's answer, or its error.
//
//go:noinline
func (a *openaiProvider) response(ctx context.Context, req *Request, k int, c *capture, resp *openai.ChatCompletionResponse, start time.Time) (*Response, error) {
	if len(resp.Choices) == 0 || (resp.Choices[0].Message.Content == "" && len(resp.Choices[0].Message.ToolCalls) == 0) {
		return nil, a.toError(ctx, req.Model, k, c, errEmptyAnswer, parseOpenAIError)
	}
	_, h, _ := c.snapshot()
	var calls []ToolCall
	for _, tc := range resp.Choices[0].Message.ToolCalls {
		calls = append(calls, ToolCall{ID: tc.ID, Name: tc.Function.Name, Arguments: a.red.String(tc.Function.Arguments)})
	}
	return &Response{
		ToolCalls:     calls,
		FinishReason:  openAIFinish(resp.Choices[0].FinishReason),
		ResponseModel: a.red.Truncate(resp.Model, 128),
		Text:          a.red.String(resp.Choices[0].Message.Content), // a provider may echo a key in its answer
		Usage:         Usage{PromptTokens: resp.Usage.PromptTokens, CompletionTokens: resp.Usage.CompletionTokens},
		Provider:      a.name,
		Model:         req.Model,
		Key:           a.fps[k],
		Latency:       a.now().Sub(start),
		RequestID:     requestID(h),
	}, nil
}

// ChatStream implements Provider.
func (a *openaiProvider) ChatStream(ctx context.Context, req Request) (*Stream, error) {
	k := a.keyIndex(ctx)
	sctx, cancel := context.WithCancel(ctx)
	cctx, c := withCapture(sctx)
	onErr := func(err error) error { return a.toError(sctx, req.Model, k, c, err, parseOpenAIError) }
	var usage Usage
	var st *openai.ChatCompletionStream
	finished, finish := false, ""
	var calls []ToolCall // by the chunks' index: id and name first, then the arguments in pieces
	src := func() (string, *Response, error) {
		for {
			chunk, err := st.Recv()
			if errors.Is(err, io.EOF) {
				if !finished {
					return "", nil, ErrStreamTruncated
				}
				_, h, _ := c.snapshot()
				for i := range calls {
					calls[i].Arguments = a.red.String(calls[i].Arguments)
				}
				return "", &Response{Usage: usage, FinishReason: finish, Provider: a.name, Model: req.Model, Key: a.fps[k], RequestID: requestID(h),
					ToolCalls: calls}, nil
			}
			if err != nil {
				return "", nil, err
			}
			if chunk.Usage != nil {
				usage = Usage{PromptTokens: chunk.Usage.PromptTokens, CompletionTokens: chunk.Usage.CompletionTokens}
			}
			if len(chunk.Choices) == 0 {
				continue
			}
			if r := chunk.Choices[0].FinishReason; r != "" {
				finished, finish = true, openAIFinish(r)
			}
			for _, tc := range chunk.Choices[0].Delta.ToolCalls {
				i := len(calls)
				switch {
				case tc.Index != nil:
					i = *tc.Index
				case tc.ID == "" && len(calls) > 0:
					i = len(calls) - 1 // a piece of the last call's arguments, sent without its index
				}
				if i < 0 || i > len(calls) || i >= maxStreamedToolCalls {
					return "", nil, fmt.Errorf("a streamed tool call at index %d (after %d)", i, len(calls))
				}
				if i == len(calls) {
					calls = append(calls, ToolCall{})
				}
				if tc.ID != "" {
					calls[i].ID = tc.ID
				}
				if tc.Function.Name != "" {
					calls[i].Name = tc.Function.Name
				}
				if calls[i].Arguments += tc.Function.Arguments; len(calls[i].Arguments) > maxToolArgumentBytes {
					return "", nil, fmt.Errorf("a streamed tool call's arguments are over %d bytes", maxToolArgumentBytes)
				}
			}
			if d := chunk.Choices[0].Delta.Content; d != "" || len(chunk.Choices[0].Delta.ToolCalls) > 0 {
				return d, nil, nil // a chunk of tool calls only: no text, but the stream is alive
			}
		}
	}
	open := func() (streamSource, func(), error) {
		var err error
		st, err = a.clients[k].CreateChatCompletionStream(cctx, a.request(req, true))
		if err != nil {
			return nil, nil, err
		}
		return src, func() { st.Close() }, nil
	}
	return newStream(sctx, cancel, req.StallTimeout, a.now, a.red, open, onErr), nil
}

// Probe makes the cheapest authenticated call (list models) with the key
// chosen by ctx (WithKey): it tells a rejected key from a failing server.
func (a *openaiProvider) Probe(ctx context.Context) error {
	k := a.keyIndex(ctx)
	cctx, c := withCapture(ctx)
	if _, err := a.clients[k].ListModels(cctx); err != nil {
		return a.toError(ctx, "models", k, c, err, parseOpenAIError)
	}
	return nil
}

func parseOpenAIError(err error) sdkError {
	var s sdkError
	var ae *openai.APIError
	var re *openai.RequestError
	switch {
	case errors.As(err, &ae):
		s.status = ae.HTTPStatusCode
		s.code = codeString(ae.Code)
		s.typ = ae.Type
		s.message = ae.Message
		s.inStream = ae.HTTPStatusCode == 0 // an error event inside a 200 stream
	case errors.As(err, &re):
		s.status = re.HTTPStatusCode
		s.rawBody = string(re.Body)
	}
	return s
}

var _ Provider = (*openaiProvider)(nil)

func (a *openaiProvider) String() string { return fmt.Sprintf("openai-compatible provider %q", a.name) }
