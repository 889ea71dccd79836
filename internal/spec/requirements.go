package spec

// Need is one thing a step needs of the worker that runs it.
type Need struct {
	Step  string // the step's id
	Kind  string // "route", "handler" or "tool"
	Name  string
	Queue string // the queue the step's tasks go to
}

// Needs lists what the spec's steps need of the workers that will run
// them: the route each prompt step asks, the function each code step runs,
// and the tools a step offers the model; with the queue each goes to, so a
// submit can check the spec against what live workers serve.
func (s *Spec) Needs() []Need {
	var out []Need
	for i := range s.Steps {
		st := &s.Steps[i]
		r := Resolve(s, st)
		if need, name := KindOf(st).Need(st, r); need != "" && name != "" {
			out = append(out, Need{Step: st.ID, Kind: need, Name: name, Queue: r.Queue})
		}
		for _, t := range st.Tools {
			name := t.Name
			if server, ok := MCPServerOf(name); ok { // a worker serves a whole server
				name = server
			}
			out = append(out, Need{Step: st.ID, Kind: "tool", Name: name, Queue: r.Queue})
		}
	}
	return out
}
