package mcptool

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// resultText is a tool's result as the model reads it: its text parts,
// one after another; an embedded resource's text under a line naming it;
// each other part (an image, audio, a link, a binary resource) described
// in a line; with no part at all, its structured content as JSON.
func resultText(r *mcp.CallToolResult) string {
	var parts []string
	for _, c := range r.Content {
		switch x := c.(type) {
		case *mcp.TextContent:
			parts = append(parts, x.Text)
		case *mcp.ImageContent:
			parts = append(parts, fmt.Sprintf("[image: %s, %d bytes, not shown]", x.MIMEType, len(x.Data)))
		case *mcp.AudioContent:
			parts = append(parts, fmt.Sprintf("[audio: %s, %d bytes, not shown]", x.MIMEType, len(x.Data)))
		case *mcp.ResourceLink:
			parts = append(parts, fmt.Sprintf("[resource link: %s %s]", x.URI, x.Name))
		case *mcp.EmbeddedResource:
			switch res := x.Resource; {
			case res == nil:
				parts = append(parts, "[resource: empty]")
			case res.Blob != nil:
				parts = append(parts, fmt.Sprintf("[resource %s: %s, %d bytes, not shown]", res.URI, res.MIMEType, len(res.Blob)))
			default:
				parts = append(parts, fmt.Sprintf("[resource %s]\n%s", res.URI, res.Text))
			}
		default:
			b, _ := json.Marshal(c)
			parts = append(parts, string(b))
		}
	}
	if len(parts) == 0 && r.StructuredContent != nil {
		b, err := json.Marshal(r.StructuredContent)
		if err == nil {
			return string(b)
		}
	}
	return strings.Join(parts, "\n")
}
