package llmclient

import "context"

// What a Provider may do beyond Chat and ChatStream. The router asks for
// these by interface; both adapters have all three (checked at compile
// time below), a provider of a user's own may have none.

// KeyedProvider is a provider with several API keys: the router rotates
// them (WithKey) and shares their state across workers by these ids.
type KeyedProvider interface {
	Provider
	KeyIDs() []string
}

// KeyFingerprinter names a provider's keys, in order, without revealing
// them.
type KeyFingerprinter interface {
	KeyFingerprints() []string
}

// Prober makes the cheapest authenticated call with the key chosen by ctx,
// to tell a rejected key from a failing server.
type Prober interface {
	Probe(ctx context.Context) error
}

var (
	_ KeyedProvider    = (*openaiProvider)(nil)
	_ KeyedProvider    = (*anthropicProvider)(nil)
	_ KeyFingerprinter = (*openaiProvider)(nil)
	_ KeyFingerprinter = (*anthropicProvider)(nil)
	_ Prober           = (*openaiProvider)(nil)
	_ Prober           = (*anthropicProvider)(nil)
)
