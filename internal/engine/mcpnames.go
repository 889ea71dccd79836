package engine

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"

	"github.com/agentq/agentq/internal/spec"
)

// The model calls an MCP server's tool by a name both dialects take
// (1 to 64 letters, digits, _ or -): mcp__SERVER__TOOL, which reads back
// unambiguously (a server's name holds no "__" and ends with a letter or
// digit). A tool whose name does not fit (a dot, a slash, too long) or
// whose name another tool of the step already has gets mcp__SERVER__
// with its name's fitting part and a hash of server/tool. The names
// depend on the step's tools alone, so every attempt, on every worker,
// offers the same ones.

// mcpModelNames names each of refs for the model, none of them one in
// taken (the step's other tools); the names are added to taken.
func mcpModelNames(refs []mcpBinding, taken map[string]bool) (map[mcpBinding]string, error) {
	refs = slices.Clone(refs)
	slices.SortFunc(refs, func(a, b mcpBinding) int { return cmp.Or(cmp.Compare(a.server, b.server), cmp.Compare(a.tool, b.tool)) })
	out := make(map[mcpBinding]string, len(refs))
	var rest []mcpBinding
	for _, r := range refs {
		if _, done := out[r]; done {
			continue
		}
		n := "mcp__" + r.server + "__" + r.tool
		if spec.ValidToolName(n) && !taken[n] {
			out[r], taken[n] = n, true
			continue
		}
		rest = append(rest, r)
	}
	for _, r := range rest {
		if _, done := out[r]; done {
			continue
		}
		sum := sha256.Sum256([]byte(r.server + "/" + r.tool))
		h := hex.EncodeToString(sum[:])
		base := "mcp__" + r.server + "__" + fitting(r.tool)
		named := false
		for _, n := range []int{8, 16, 32} {
			suffix := "_" + h[:n]
			name := base[:min(len(base), 64-len(suffix))] + suffix
			if !taken[name] {
				out[r], taken[name], named = name, true, true
				break
			}
		}
		if !named {
			return nil, fmt.Errorf("tool %s: no name for the model is left that the step's other tools do not have", r.ref())
		}
	}
	return out, nil
}

// fitting is s with every character a tool name may not hold replaced by _.
func fitting(s string) string {
	return strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-' {
			return r
		}
		return '_'
	}, s)
}
