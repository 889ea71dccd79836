package spec

import (
	"strings"
	"testing"
)

func TestInputKeys(t *testing.T) {
	s, err := ParseSpec("w.yaml", []byte(salesReport), routes, DefaultLimits())
	if err != nil {
		t.Fatal(err)
	}
	if keys, all := s.InputKeys(); all || strings.Join(keys, ",") != "question" {
		t.Errorf("sales report reads %v (all %v), want question", keys, all)
	}
	s, err = ParseSpec("w.yaml", []byte(codeSpec), routes, DefaultLimits())
	if err != nil {
		t.Fatal(err)
	}
	if keys, all := s.InputKeys(); all || strings.Join(keys, ",") != "regions" {
		t.Errorf("code spec reads %v (all %v), want regions (from a prompt and a with:)", keys, all)
	}
	whole := "name: x\nsteps:\n  - { id: a, route: report, prompt: \"{{ range $k, $v := .Input }}{{ $k }}{{ end }}\" }\n"
	if s, err = ParseSpec("w.yaml", []byte(whole), routes, DefaultLimits()); err != nil {
		t.Fatal(err)
	}
	if _, all := s.InputKeys(); !all {
		t.Error("a template ranging over .Input reads every key")
	}
}
