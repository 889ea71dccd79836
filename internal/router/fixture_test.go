package router_test

import (
	"testing"

	"github.com/agentq/agentq/internal/chaosllm"
	"github.com/agentq/agentq/internal/llmtest"
)

const goodKey = llmtest.GoodKey

var ask = llmtest.Ask

type fixture struct{ *llmtest.Fixture }

func newFixture(t *testing.T, sc chaosllm.Scenario, keys ...string) fixture {
	return fixture{llmtest.New(t, sc, keys...)}
}
