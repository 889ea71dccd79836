package hookcheck

import (
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
)

// secretPrefix marks a secret given as base64, as Standard Webhooks
// secrets are written.
const secretPrefix = "whsec_"

// MinSecretBytes is the shortest signing key accepted.
const MinSecretBytes = 16

// ParseSecret returns the signing key of a secret: "whsec_" and base64 is
// decoded (as Standard Webhooks libraries do); anything else is used as
// its bytes. A key under MinSecretBytes is an error; no error repeats the
// secret.
func ParseSecret(secret string) ([]byte, error) {
	var key []byte
	if b64, ok := strings.CutPrefix(secret, secretPrefix); ok {
		var err error
		if key, err = base64.StdEncoding.DecodeString(b64); err != nil {
			return nil, errors.New("a whsec_ secret is not valid base64 after its prefix")
		}
	} else {
		key = []byte(secret)
	}
	if len(key) < MinSecretBytes {
		return nil, fmt.Errorf("the secret is %d bytes, under %d", len(key), MinSecretBytes)
	}
	return key, nil
}
