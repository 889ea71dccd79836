package llmclient

// StreamSource is what StreamFrom hands out: an answer arriving piece by
// piece from somewhere other than a provider's connection (another
// Provider's stream, put through policies of its own). Recv returns the
// next piece, io.EOF after the last one, or the call's error; Response is
// the whole answer once Recv has returned io.EOF, else nil; Close
// releases what the source holds, and is called in every case.
type StreamSource interface {
	Recv() (string, error)
	Response() *Response
	Close() error
}

// StreamFrom is a Stream whose Recv, Response and Close are src's: what a
// Provider that wraps other providers (a route of agentq's router)
// returns from ChatStream. The pieces are handed out as src gives them:
// src has redacted them and bounds its own stalls.
func StreamFrom(src StreamSource) *Stream { return &Stream{src: src} }
