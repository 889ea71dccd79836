package llmclient_test

import (
	"fmt"

	"github.com/agentq/agentq/llmclient"
)

func ExampleFingerprint() {
	fmt.Println(llmclient.Fingerprint("openai", 1, "sk-not-a-real-key"))
	// Output: openai#2 (…3f7b)
}
