package spec

// The spec as a graph: steps by id, dependents, roots, ancestors, cycles.

// Step returns the step with the given id.
func (s *Spec) Step(id string) (*Step, bool) {
	if s.index != nil {
		i, ok := s.index[id]
		if !ok {
			return nil, false
		}
		return &s.Steps[i], true
	}
	for i := range s.Steps {
		if s.Steps[i].ID == id {
			return &s.Steps[i], true
		}
	}
	return nil, false
}

// Dependents lists the steps that depend on id directly.
func (s *Spec) Dependents(id string) []string {
	if s.dependents != nil {
		return s.dependents[id]
	}
	var out []string
	for _, st := range s.Steps {
		for _, d := range st.DependsOn {
			if d == id {
				out = append(out, st.ID)
			}
		}
	}
	return out
}

// indexGraph builds the lookups Step and Dependents use, so that a
// settle in a wide workflow costs the same as in a narrow one.
func (s *Spec) indexGraph() {
	s.index = make(map[string]int, len(s.Steps))
	s.dependents = make(map[string][]string, len(s.Steps))
	for i, st := range s.Steps {
		s.index[st.ID] = i
		for _, d := range st.DependsOn {
			s.dependents[d] = append(s.dependents[d], st.ID)
		}
	}
}

// Finals lists the steps nothing depends on (a chord's body, a chain's
// end), in spec order: the workflow's answer.
func (s *Spec) Finals() []string {
	used := map[string]bool{}
	for _, st := range s.Steps {
		for _, d := range st.DependsOn {
			used[d] = true
		}
	}
	var out []string
	for _, st := range s.Steps {
		if !used[st.ID] {
			out = append(out, st.ID)
		}
	}
	return out
}

// Roots lists the steps with no dependencies.
func (s *Spec) Roots() []string {
	var out []string
	for _, st := range s.Steps {
		if len(st.DependsOn) == 0 {
			out = append(out, st.ID)
		}
	}
	return out
}

func (s *Spec) ancestors(id string) map[string]bool {
	out := map[string]bool{}
	var walk func(string)
	walk = func(x string) {
		st, _ := s.Step(x)
		for _, d := range st.DependsOn {
			if !out[d] {
				out[d] = true
				walk(d)
			}
		}
	}
	walk(id)
	return out
}

// findCycle returns the steps of one dependency cycle, or nil.
func (s *Spec) findCycle() []string {
	const (
		white = iota
		grey
		black
	)
	color := map[string]int{}
	var stack []string
	var cycle []string
	var visit func(string) bool
	visit = func(id string) bool {
		color[id] = grey
		stack = append(stack, id)
		st, _ := s.Step(id)
		for _, d := range st.DependsOn {
			switch color[d] {
			case grey:
				for i, x := range stack {
					if x == d {
						cycle = append(append([]string{}, stack[i:]...), d)
					}
				}
				return true
			case white:
				if visit(d) {
					return true
				}
			}
		}
		stack = stack[:len(stack)-1]
		color[id] = black
		return false
	}
	for _, st := range s.Steps {
		if color[st.ID] == white && visit(st.ID) {
			return cycle
		}
	}
	return nil
}
