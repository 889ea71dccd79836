package llmclient

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
)

// Fingerprint names the idx-th (0-based) key of a provider without revealing
// it: "openai#2 (…f3a9)", where f3a9 is the end of the key's SHA-256, not of
// the key itself.
func Fingerprint(provider string, idx int, key string) string {
	sum := sha256.Sum256([]byte(key))
	h := hex.EncodeToString(sum[:])
	return fmt.Sprintf("%s#%d (…%s)", provider, idx+1, h[len(h)-4:])
}

// KeyID is a key's stable identity in shared state: the start of its
// SHA-256, from which the key cannot be recovered.
func KeyID(key string) string {
	sum := sha256.Sum256([]byte(key))
	return hex.EncodeToString(sum[:8])
}
