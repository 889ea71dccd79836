package flow

import (
	"fmt"
	"strings"
)

// BoundID bounds an id read from a payload before it is logged or returned:
// a hand-made payload may carry anything.
func BoundID(id string) string {
	const max = 128
	if len(id) <= max {
		return id
	}
	return strings.ToValidUTF8(id[:max], "") + fmt.Sprintf("… (%d bytes)", len(id))
}
