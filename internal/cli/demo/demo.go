// Package demo holds the embedded demo's configuration, scenario and
// workflow.
package demo

import _ "embed"

// Config is the demo's agentq.yaml.
//
//go:embed agentq.yaml
var Config []byte

// Scenario is the chaosllm outage the demo survives.
//
//go:embed scenario.yaml
var Scenario []byte

// Workflow is the demo workflow spec.
//
//go:embed sales-report.yaml
var Workflow []byte
