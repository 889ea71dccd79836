package chaosllm

import (
	"encoding/json"
	"fmt"
	"strings"
)

// message is what chaosllm reads of one message of a conversation,
// whichever the dialect.
type message struct {
	role    string
	calls   []string     // the ids of the tool calls an assistant message made
	results []toolResult // the tool results a message carries
}

// toolResult is one tool result a client sent back.
type toolResult struct {
	id, content string
	isError     bool
}

// toolCall is a call chaosllm makes; the dialect puts its prefix before
// the id (call_, toolu_).
type toolCall struct{ id, name, args string }

// offeredTool is a tool a request offers.
type offeredTool struct {
	name   string
	schema map[string]any
}

// readConversation checks how a conversation's tool calls and results pair
// up, as the providers do, and fills in req's turn and results. Every call
// of an assistant message needs one result, in the messages right after
// it; with oneMessage (Anthropic) all of them in the very next message.
func (req *request) readConversation(msgs []message, oneMessage bool) error {
	var pending []string         // the last assistant message's calls, in order
	open := map[string]int{}     // results still owed, per call id
	owed := 0                    // their sum
	var fresh []toolResult       // the results since the last assistant message
	firstOwed := func() string { // the first call still without a result
		for _, id := range pending {
			if open[id] > 0 {
				return id
			}
		}
		return ""
	}
	assistants := 0
	for i, m := range msgs {
		if owed > 0 && len(m.results) == 0 {
			return fmt.Errorf("messages[%d]: tool call %q has no result (results come right after the assistant message that made the calls)", i, firstOwed())
		}
		for _, r := range m.results {
			if open[r.id] == 0 {
				return fmt.Errorf("messages[%d]: the tool result for %q answers no call of the assistant message before it", i, r.id)
			}
			open[r.id]--
			owed--
		}
		if oneMessage && len(m.results) > 0 && owed > 0 {
			return fmt.Errorf("messages[%d]: tool call %q has no result in this message (the results of a turn go in one user message)", i, firstOwed())
		}
		if m.role == "assistant" {
			assistants++
			pending, open, owed, fresh = m.calls, map[string]int{}, len(m.calls), nil
			for _, id := range m.calls {
				open[id]++
			}
		}
		req.results = append(req.results, m.results...)
		fresh = append(fresh, m.results...)
		req.toolTalk = req.toolTalk || len(m.calls) > 0 || len(m.results) > 0
	}
	if owed > 0 {
		return fmt.Errorf("tool call %q has no result: the conversation ends with it unanswered", firstOwed())
	}
	req.turn, req.fresh = assistants+1, fresh
	return nil
}

// toolMove is what the model does with a request: the tool calls it makes
// and the text sent with them, or no calls when it answers with text. A
// stream calls tools as a plain request does (its dialect's toolStream).
func (s *Server) toolMove(req request, id string) ([]toolCall, string) {
	if len(req.tools) == 0 {
		return nil, ""
	}
	s.mu.Lock()
	script := s.scenario.ToolScript
	s.mu.Unlock()
	if len(script) > 0 {
		if req.turn <= len(script) {
			t := script[req.turn-1]
			return scriptedCalls(t, id), t.Text
		}
		return nil, ""
	}
	if len(req.results) > 0 {
		return nil, "" // the default conversation: one call, then the answer
	}
	// a model given tools calls the first one, with arguments that match
	// its parameters
	args, _ := json.Marshal(instance(req.tools[0].schema, Reply(req.prompt), 0))
	return []toolCall{{id: id, name: req.tools[0].name, args: string(args)}}, ""
}

// finalText is the answer to a conversation that holds tool results: it
// names every result, in order, an error's after "error: ".
func finalText(results []toolResult) string {
	parts := make([]string, len(results))
	for i, r := range results {
		parts[i] = r.content
		if r.isError {
			parts[i] = "error: " + r.content
		}
	}
	return "final answer using results: " + strings.Join(parts, "; ")
}

// openAIErrorResult reads a role "tool" message's content: OpenAI has no
// error flag, so a result whose content starts with "error:" (any case) is
// an error, and the rest is its content.
func openAIErrorResult(content string) (string, bool) {
	const p = "error:"
	if len(content) >= len(p) && strings.EqualFold(content[:len(p)], p) {
		return strings.TrimLeft(content[len(p):], " "), true
	}
	return content, false
}
