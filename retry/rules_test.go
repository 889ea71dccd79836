package retry

import "testing"

// Every class has its row in the table, and the rows keep the invariants
// the policies rely on.
func TestEveryClassHasARule(t *testing.T) {
	for _, c := range Classes() { // every constant is a row: TestEveryClassIsDocumented
		r, ok := rules[c]
		if !ok {
			t.Errorf("%s has no rule", c)
		}
		if r.RequestFault && (r.Retryable || r.ProviderFault) {
			t.Errorf("%s: a request's own fault is neither retryable nor the provider's", c)
		}
		if r.ProviderFault && (r.Answered || !r.LowersHealth) {
			t.Errorf("%s: a provider fault did not answer and lowers health", c)
		}
		if r.Free && (!r.Retryable || r.ProviderFault || r.RequestFault || r.Key != KeyFine) {
			t.Errorf("%s: a free attempt is retried and nobody's fault", c)
		}
	}
	if !Class("new_class").Retryable() || Class("new_class").ProviderFault() {
		t.Error("an unknown class is retryable and nobody's fault")
	}
}
