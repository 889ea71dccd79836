package chaoscli_test

import (
	"os"
	"testing"

	"github.com/agentq/agentq/internal/redistest"
)

// TestMain fails the run if a test leaves goroutines behind.
func TestMain(m *testing.M) { os.Exit(redistest.Main(m)) }
