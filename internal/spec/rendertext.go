package spec

import (
	"reflect"
	"strings"
)

// The builtins that make text (print, printf, println, html, js, urlquery)
// are replaced for each render by the same functions with two checks: one
// before the call, an upper bound on what the call can make, which must fit
// in what is left of maxFuncText (so no single call can build a gigabyte:
// printf with 1,000 verbs of width 1,000,000 would), and one after, which
// charges what it made. They call exactly the functions text/template's
// builtins are, so what they make is unchanged.

func (b *renderBudget) left() int64 { return maxFuncText - b.text }

// produce runs f if it can make at most bound bytes within the budget.
func (b *renderBudget) produce(bound int64, f func() string) (string, error) {
	if err := b.check(); err != nil {
		return "", err
	}
	if bound > b.left() {
		return "", b.over("bytes of text from print functions", maxFuncText)
	}
	s := f()
	b.text += int64(len(s))
	return s, nil
}

// argsText bounds the bytes fmt's %v takes for args, counting no further
// than limit.
func argsText(args []any, limit int64) int64 {
	var n int64
	for _, a := range args {
		if n += textBound(a, limit-n); n > limit {
			break
		}
	}
	return n
}

// textBound is an upper bound on the bytes fmt's %v or %#v takes for x,
// for the values a prompt sees (strings, numbers, bools, nil, and lists and
// maps of them from JSON and YAML), counting no further than limit. Each
// list, map or struct counts 32 for a type name (%#v), each item 4 for
// separators and quotes, each number or bool 64.
func textBound(x any, limit int64) int64 {
	if s, ok := x.(string); ok {
		return int64(len(s))
	}
	var n int64
	var walk func(reflect.Value)
	walk = func(v reflect.Value) {
		if n > limit {
			return
		}
		switch v.Kind() {
		case reflect.Invalid:
			n += 5 // <nil>
		case reflect.String:
			n += int64(v.Len())
		case reflect.Interface, reflect.Pointer:
			n += 20 // nil or an address
			if !v.IsNil() {
				walk(v.Elem())
			}
		case reflect.Slice, reflect.Array:
			n += 32
			for i := 0; i < v.Len() && n <= limit; i++ {
				n += 4
				walk(v.Index(i))
			}
		case reflect.Map:
			n += 32
			for it := v.MapRange(); it.Next() && n <= limit; {
				n += 4
				walk(it.Key())
				walk(it.Value())
			}
		case reflect.Struct:
			n += 32
			for i := 0; i < v.NumField() && n <= limit; i++ {
				n += int64(len(v.Type().Field(i).Name)) + 4
				walk(v.Field(i))
			}
		default:
			n += 64
		}
	}
	walk(reflect.ValueOf(x))
	return n
}

// printfText bounds what fmt.Sprintf(format, args...) makes: the format,
// each verb's width and precision (fmt takes at most 1,000,000 of each) and
// up to 350 bytes of its own (%f of 1e308 is 316), and the arguments: each
// once, or each verb the largest when verbs pick arguments by index ([n]),
// six times over when a verb escapes (%q, %x, %X, %U, # flag).
func printfText(format string, args []any, limit int64) int64 {
	const maxWidth = 1_000_000
	var star int64 // the largest integer argument, for * widths
	for _, a := range args {
		v := reflect.ValueOf(a)
		switch v.Kind() {
		case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
			star = max(star, min(abs(v.Int()), maxWidth))
		case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
			star = max(star, int64(min(v.Uint(), maxWidth)))
		}
	}
	var verbs, widths int64
	indexed, escapes := false, false
	for i := 0; i < len(format); i++ {
		if format[i] != '%' {
			continue
		}
		i++
		if i < len(format) && format[i] == '%' {
			continue
		}
		verbs++
		// flags, argument indexes, width and precision, then the verb
		var num int64
		for ; i < len(format); i++ {
			c := format[i]
			if c >= '0' && c <= '9' {
				num = min(num*10+int64(c-'0'), maxWidth)
				continue
			}
			widths, num = widths+num, 0
			switch c {
			case '[': // the digits of an index are not a width
				indexed = true
				for i < len(format) && format[i] != ']' {
					i++
				}
				continue
			case '*':
				widths += star
				continue
			case '#':
				escapes = true
				continue
			case '.', '+', '-', ' ':
				continue
			}
			escapes = escapes || strings.IndexByte("qxXU", c) >= 0
			break
		}
		widths += num
	}
	var argText, largest int64
	for _, a := range args {
		t := textBound(a, limit)
		argText, largest = argText+t+32, max(largest, t+32) // +32: a type name in %!verb(type=...)
		if argText > limit {
			break
		}
	}
	if indexed {
		argText = max(argText, verbs*largest)
	}
	if escapes {
		argText *= 6
	}
	return int64(len(format)) + widths + verbs*350 + argText
}

func abs(n int64) int64 {
	if n < 0 {
		return -n
	}
	return n
}
