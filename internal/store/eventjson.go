package store

import (
	"encoding/json"
	"math"
	"strconv"
	"time"
	"unicode/utf8"
)

// appendEventJSON appends e as encoding/json marshals it (the log's
// bytes are the same either way: TestEventJSONIsEncodingJSONs), without
// reflection: the hot paths log a few events a step.
func appendEventJSON(b []byte, e *Event) []byte {
	b = append(b, `{"id":`...)
	b = appendJSONString(b, e.ID)
	b = append(b, `,"type":`...)
	b = appendJSONString(b, e.Type)
	b = appendStr(b, `,"step":`, e.Step)
	b = appendInt(b, `,"attempt":`, int64(e.Attempt))
	b = append(b, `,"at":`...)
	b = appendJSONTime(b, e.At)
	b = appendStr(b, `,"name":`, e.Name)
	b = appendStr(b, `,"state":`, e.State)
	b = appendInt(b, `,"gen":`, int64(e.Gen))
	b = appendStrs(b, `,"steps":`, e.Steps)
	b = appendStr(b, `,"worker":`, e.Worker)
	b = appendStr(b, `,"class":`, e.Class)
	b = appendStr(b, `,"reason":`, e.Reason)
	if e.NextAttemptAt != nil {
		b = append(b, `,"next_attempt_at":`...)
		b = appendJSONTime(b, *e.NextAttemptAt)
	}
	b = appendStr(b, `,"route":`, e.Route)
	b = appendStr(b, `,"target":`, e.Target)
	b = appendStr(b, `,"provider":`, e.Provider)
	b = appendStr(b, `,"key":`, e.Key)
	b = appendInt(b, `,"latency_ms":`, e.LatencyMS)
	b = appendInt(b, `,"prompt_tokens":`, int64(e.PromptTokens))
	b = appendInt(b, `,"completion_tokens":`, int64(e.CompletionTokens))
	if e.CostUSD != 0 {
		b = append(b, `,"cost_usd":`...)
		b = appendJSONFloat(b, e.CostUSD)
	}
	b = appendStrs(b, `,"tools":`, e.Tools)
	b = appendStr(b, `,"error":`, e.Error)
	b = appendStr(b, `,"text":`, e.Text)
	b = appendStr(b, `,"prompt":`, e.Prompt)
	b = appendStr(b, `,"answer":`, e.Answer)
	b = appendInt(b, `,"dropped":`, e.Dropped)
	return append(b, '}')
}

// appendStr appends an omitempty string member.
func appendStr(b []byte, name, v string) []byte {
	if v == "" {
		return b
	}
	return appendJSONString(append(b, name...), v)
}

// appendInt appends an omitempty integer member.
func appendInt(b []byte, name string, v int64) []byte {
	if v == 0 {
		return b
	}
	return strconv.AppendInt(append(b, name...), v, 10)
}

// appendStrs appends an omitempty list of strings.
func appendStrs(b []byte, name string, vs []string) []byte {
	if len(vs) == 0 {
		return b
	}
	b = append(append(b, name...), '[')
	for i, v := range vs {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendJSONString(b, v)
	}
	return append(b, ']')
}

// appendJSONString appends s quoted as encoding/json does (HTML
// characters escaped, invalid UTF-8 replaced): as it is when it is plain
// printable ASCII, else by encoding/json itself.
func appendJSONString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= utf8.RuneSelf || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			q, _ := json.Marshal(s)
			return append(b, q...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}

// appendJSONTime appends t as time.Time's MarshalJSON does.
func appendJSONTime(b []byte, t time.Time) []byte {
	if y := t.Year(); y < 0 || y > 9999 {
		q, _ := json.Marshal(t) // refused: the field reads null
		if q == nil {
			q = []byte("null")
		}
		return append(b, q...)
	}
	b = append(b, '"')
	b = t.AppendFormat(b, time.RFC3339Nano)
	return append(b, '"')
}

// appendJSONFloat appends f as encoding/json does.
func appendJSONFloat(b []byte, f float64) []byte {
	if math.IsInf(f, 0) || math.IsNaN(f) {
		return append(b, '0') // encoding/json refuses them; a cost is never one
	}
	format := byte('f')
	if abs := math.Abs(f); abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	b = strconv.AppendFloat(b, f, format, -1, 64)
	if format == 'e' { // e-09 to e-9, as encoding/json writes it
		if n := len(b); n >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
			b[n-2] = b[n-1]
			b = b[:n-1]
		}
	}
	return b
}
