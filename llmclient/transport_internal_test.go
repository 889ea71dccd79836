package llmclient

import (
	"crypto/x509"
	"net/http"
	"testing"
)

// The transports this package builds give HTTP/1.1 connections the small
// buffers (connReadBuffer, connWriteBuffer), the pooled one and the one
// for a provider's own CA alike; sizes the program set on
// http.DefaultTransport are kept, and a transport the program gives an
// adapter is used as it is.
func TestTheBuiltTransportsKeepSmallBuffers(t *testing.T) {
	for name, rt := range map[string]http.RoundTripper{
		"pooled":  pooledTransport(1001),
		"own CA":  rootedTransport(x509.NewCertPool(), 1002),
		"options": Options{IdleConnsPerHost: 1003}.transport(),
	} {
		tr, ok := rt.(*http.Transport)
		if !ok {
			t.Fatalf("%s: a %T, want an *http.Transport", name, rt)
		}
		if tr.ReadBufferSize != connReadBuffer || tr.WriteBufferSize != connWriteBuffer {
			t.Errorf("%s: buffers %d and %d bytes, want %d and %d", name, tr.ReadBufferSize, tr.WriteBufferSize, connReadBuffer, connWriteBuffer)
		}
	}

	sized := goDefaultTransport.(*http.Transport).Clone()
	sized.ReadBufferSize, sized.WriteBufferSize = 64<<10, 32<<10
	saved := goDefaultTransport
	goDefaultTransport = sized
	defer func() { goDefaultTransport = saved }()
	if tr := pooledTransport(1004); tr.ReadBufferSize != 64<<10 || tr.WriteBufferSize != 32<<10 {
		t.Errorf("the program's sizes became %d and %d bytes, want 65536 and 32768 kept", tr.ReadBufferSize, tr.WriteBufferSize)
	}

	own := &http.Transport{}
	if rt := (Options{Transport: own}).transport(); rt != own {
		t.Errorf("an adapter given a transport uses %T %p, want its own %p", rt, rt, own)
	}
	if own.ReadBufferSize != 0 || own.WriteBufferSize != 0 {
		t.Errorf("the program's transport was changed: buffers %d and %d", own.ReadBufferSize, own.WriteBufferSize)
	}
}
