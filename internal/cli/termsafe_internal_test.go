package cli

import (
	"bytes"
	"testing"
)

// What acts on a terminal is escaped, the rest passes as it is: ESC, BEL,
// CR, C1 controls, a lone 0x9b (8-bit CSI), bidi overrides; newlines,
// tabs and other text stay.
func TestTermSafeEscapes(t *testing.T) {
	for in, want := range map[string]string{
		"plain\ttext\n":            "plain\ttext\n",
		"é ü 日本":                   "é ü 日本",
		"\x1b[31mred\x07":          `\x1b[31mred\x07`,
		"over\rwrite":              `over\x0dwrite`,
		"csi \x9b31m":              `csi \x9b31m`,
		"c1 \u009b":                `c1 \x9b`,
		"bidi \u202egnp.exe\u2066": `bidi \u202egnp.exe\u2066`,
	} {
		var b bytes.Buffer
		if n, err := (termSafe{&b}).Write([]byte(in)); err != nil || n != len(in) || b.String() != want {
			t.Errorf("%q: wrote %q (%d, %v), want %q", in, b.String(), n, err, want)
		}
	}
}
