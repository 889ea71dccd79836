// Package stepfunc carries a code step's function from the SDK's type
// (agentq.StepFunc, over *agentq.Step) to the engine's (engine.StepFunc,
// over *engine.CodeStep) for package agentqtest, which runs an SDK
// function on the engine's test step but cannot reach the SDK's unexported
// conversion. Package agentq sets Of when it is loaded, so any package
// that imports agentq finds it set.
package stepfunc

import "github.com/agentq/agentq/internal/engine"

// Of is fn (an agentq.StepFunc) as the engine runs it; nil for a nil fn
// or a value of another type.
var Of func(fn any) engine.StepFunc
