package spec

import (
	"crypto/sha256"
	"encoding/base32"
	"strings"
)

// ShapeKey names a stored spec's shape: the spec as stored (its JSON)
// without its input, so that the workflows submitted from one spec with
// different inputs share it. A worker that parsed a shape once runs the
// next workflow of it without reading its spec first: the producer puts
// the key in the step tasks (tasks.Payload.Shape) and the worker reads
// the input alone with the step's begin. input is raw's top-level input
// member's value (nil: none); ok is false for raw that is not a JSON
// object.
func ShapeKey(raw []byte) (key string, input []byte, ok bool) {
	start, vstart, end, ok := topMember(raw, "input")
	if !ok {
		return "", nil, false
	}
	h := sha256.New()
	if start < 0 {
		h.Write(raw)
	} else {
		h.Write(raw[:start])
		h.Write([]byte{0})
		h.Write(raw[end:])
		input = raw[vstart:end]
	}
	var sum [sha256.Size]byte
	return strings.ToLower(shapeEncoding.EncodeToString(h.Sum(sum[:0])[:15])), input, true
}

var shapeEncoding = base32.StdEncoding.WithPadding(base32.NoPadding)

// SetShape records s's stored form's ShapeKey: the client that stores s
// and the worker that reads it set it, and s's step tasks carry it
// (tasks.Payload.Shape).
func SetShape(s *Spec, key string) { s.shape = key }

// ShapeOf is s's ShapeKey as SetShape recorded it ("": unknown).
func ShapeOf(s *Spec) string { return s.shape }

// topMember finds the member name (written without escapes) of the JSON
// object raw: where its key starts, where its value starts and ends
// (start -1: raw has no such member); ok is false when raw is not one
// JSON object.
func topMember(raw []byte, name string) (start, vstart, end int, ok bool) {
	start = -1
	i := skipSpace(raw, 0)
	if i >= len(raw) || raw[i] != '{' {
		return 0, 0, 0, false
	}
	i = skipSpace(raw, i+1)
	if i < len(raw) && raw[i] == '}' {
		return start, 0, 0, skipSpace(raw, i+1) == len(raw)
	}
	for {
		if i >= len(raw) || raw[i] != '"' {
			return 0, 0, 0, false
		}
		k := i
		if i = skipString(raw, i); i < 0 {
			return 0, 0, 0, false
		}
		key := raw[k+1 : i-1]
		if i = skipSpace(raw, i); i >= len(raw) || raw[i] != ':' {
			return 0, 0, 0, false
		}
		v := skipSpace(raw, i+1)
		if i = skipValue(raw, v); i < 0 {
			return 0, 0, 0, false
		}
		if string(key) == name && start < 0 {
			start, vstart, end = k, v, i
		}
		if i = skipSpace(raw, i); i >= len(raw) {
			return 0, 0, 0, false
		}
		switch raw[i] {
		case ',':
			i = skipSpace(raw, i+1)
		case '}':
			return start, vstart, end, skipSpace(raw, i+1) == len(raw)
		default:
			return 0, 0, 0, false
		}
	}
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// skipString returns the index after the string starting at b[i] ('"'),
// -1 if it does not end.
func skipString(b []byte, i int) int {
	for i++; i < len(b); i++ {
		switch b[i] {
		case '\\':
			i++
		case '"':
			return i + 1
		}
	}
	return -1
}

// skipValue returns the index after the JSON value starting at b[i], -1
// if it is cut short. Only the brackets and strings are checked: what it
// skips is what encoding/json wrote.
func skipValue(b []byte, i int) int {
	if i >= len(b) {
		return -1
	}
	switch b[i] {
	case '"':
		return skipString(b, i)
	case '{', '[':
		depth := 0
		for ; i < len(b); i++ {
			switch b[i] {
			case '"':
				if i = skipString(b, i); i < 0 {
					return -1
				}
				i--
			case '{', '[':
				depth++
			case '}', ']':
				if depth--; depth == 0 {
					return i + 1
				}
			}
		}
		return -1
	}
	for ; i < len(b); i++ { // a number, true, false or null
		switch b[i] {
		case ',', '}', ']', ' ', '\t', '\n', '\r':
			return i
		}
	}
	return i
}
