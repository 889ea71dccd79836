package chaosllm

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
)

// Answer is what the server answers to the prompts it matches, instead of
// its default reply: a text as it is, or a JSON object with a list of
// items (a planning step's answer, to try a map with). The first entry of
// Scenario.Answers that matches a request answers it; faults still apply.
type Answer struct {
	// Match is a regular expression (RE2) the prompt (the conversation's
	// last user message) must contain a match of; empty matches every
	// prompt.
	Match string `yaml:"match" json:"match"`
	// Endpoint limits the answer to "openai" or "anthropic"; empty: both.
	Endpoint string `yaml:"endpoint" json:"endpoint"`
	// Text is the answer's text, sent as it is (for a request that asks
	// for JSON, it should be JSON).
	Text string `yaml:"text" json:"text"`
	// Items, with Text empty, answers {"<field>": ["<field> 1", …]} with
	// this many items.
	Items int `yaml:"items" json:"items"`
	// Field names Items' list; empty: "items".
	Field string `yaml:"field" json:"field"`
}

// answerRule is an Answer with its pattern compiled.
type answerRule struct {
	Answer
	re *regexp.Regexp
}

// compileAnswers checks the scenario's answers and compiles their
// patterns; each refusal names the entry and its field.
func compileAnswers(as []Answer) ([]answerRule, error) {
	out := make([]answerRule, 0, len(as))
	for i, a := range as {
		where := fmt.Sprintf("scenario: answers[%d]", i)
		re, err := regexp.Compile(a.Match)
		if err != nil {
			return nil, fmt.Errorf("%s.match: %q is not a regular expression: %w", where, a.Match, err)
		}
		switch {
		case a.Endpoint != "" && a.Endpoint != "openai" && a.Endpoint != "anthropic":
			return nil, fmt.Errorf("%s.endpoint: %q is not openai or anthropic", where, a.Endpoint)
		case a.Items < 0:
			return nil, fmt.Errorf("%s.items: cannot be negative", where)
		case a.Text != "" && a.Items > 0:
			return nil, fmt.Errorf("%s: text and items are two answers; give one", where)
		case a.Text == "" && a.Items == 0:
			return nil, fmt.Errorf("%s: no answer: give text, or items (a JSON list)", where)
		}
		out = append(out, answerRule{Answer: a, re: re})
	}
	return out, nil
}

// answerFor is the text of the first rule that matches a prompt on
// endpoint ep; ok is false when none does.
func answerFor(rules []answerRule, ep, prompt string) (string, bool) {
	for _, r := range rules {
		if (r.Endpoint != "" && r.Endpoint != ep) || !r.re.MatchString(prompt) {
			continue
		}
		if r.Text != "" {
			return r.Text, true
		}
		field := r.Field
		if field == "" {
			field = "items"
		}
		items := make([]string, r.Items)
		for n := range items {
			items[n] = field + " " + strconv.Itoa(n+1)
		}
		b, _ := json.Marshal(map[string][]string{field: items})
		return string(b), true
	}
	return "", false
}
