package config

import (
	"errors"
	"regexp"

	"gopkg.in/yaml.v3"

	"github.com/agentq/agentq/internal/problem"
)

// A command that holds no provider secret (the dashboard, enqueue) loads
// the workers' configuration without providers[].keys: the workers
// advertise their keys' ids and fingerprints in Redis, which is all such a
// command shows or changes. See Input.WithoutProviderKeys.

// dropProviderKeys removes every providers[].keys from a parsed file,
// before anything in it is expanded: an unset ${VAR} or a missing
// ${file:PATH} there is then no error, and no key is read.
func dropProviderKeys(root *yaml.Node) {
	if root.Kind != yaml.DocumentNode || len(root.Content) == 0 {
		return
	}
	top := root.Content[0]
	if top.Kind != yaml.MappingNode {
		return
	}
	for i := 0; i+1 < len(top.Content); i += 2 {
		if top.Content[i].Value != "providers" || top.Content[i+1].Kind != yaml.SequenceNode {
			continue
		}
		for _, p := range top.Content[i+1].Content {
			if p.Kind != yaml.MappingNode {
				continue
			}
			for j := 0; j+1 < len(p.Content); j += 2 {
				if p.Content[j].Value == "keys" {
					p.Content = append(p.Content[:j:j], p.Content[j+2:]...)
					j -= 2
				}
			}
		}
	}
}

var keysField = regexp.MustCompile(`^providers\[\d+\]\.keys(\[\d+\])?$`)

// withoutKeyProblems drops the problems about providers[].keys (an
// anthropic provider needs one) from validation's: keys not loaded are not
// missing.
func withoutKeyProblems(err error) error {
	var out []error
	for _, e := range problem.Split(err) {
		var fe *FieldError
		if errors.As(e, &fe) && keysField.MatchString(fe.Field) {
			continue
		}
		out = append(out, e)
	}
	return errors.Join(out...)
}
