package llmclient

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
)

// Fingerprint names the idx-th (0-based) key of a provider without revealing
// it: "openai#2 (…f3a9)", where f3a9 is the end of the key's SHA-256, not of
// the key itself.
func Fingerprint(provider string, idx int, key string) string {
	sum := sha256.Sum256([]byte(key))
	h := hex.EncodeToString(sum[:])
	return fmt.Sprintf("%s#%d (…%s)", provider, idx+1, h[len(h)-4:])
}

// scrubber replaces every key of a provider by its fingerprint in text that
// came back from the network (error bodies may echo the key).
type scrubber struct {
	keys []string
	fps  []string
}

func (s scrubber) scrub(text string) string {
	for i, k := range s.keys {
		if k != "" && strings.Contains(text, k) {
			text = strings.ReplaceAll(text, k, s.fps[i])
		}
	}
	return text
}
