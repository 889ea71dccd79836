package main

import (
	"encoding/pem"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"time"

	"github.com/agentq/agentq/internal/chaosllm"
)

// serveChaosTLS serves srv over HTTPS with HTTP/2 offered, on a
// certificate of its own written to a PEM file (for a ca_file): its URL,
// the file, and what stops it.
func serveChaosTLS(srv *chaosllm.Server) (string, string, func(), error) {
	hs := httptest.NewUnstartedServer(srv)
	hs.EnableHTTP2 = true
	hs.Config.ConnState = chaosConns.Count
	hs.StartTLS()
	f, err := os.CreateTemp("", "agentq-bench-ca-*.pem")
	if err != nil {
		hs.Close()
		return "", "", nil, err
	}
	werr := pem.Encode(f, &pem.Block{Type: "CERTIFICATE", Bytes: hs.Certificate().Raw})
	if err := errors.Join(werr, f.Close()); err != nil {
		hs.Close()
		os.Remove(f.Name())
		return "", "", nil, err
	}
	return hs.URL, f.Name(), func() { hs.Close(); os.Remove(f.Name()) }, nil
}

// chaosConns counts the connections chaosllm's servers accepted: a
// run's share of them says whether its workers reused their connections
// or dialed again for each call.
var chaosConns chaosllm.ConnCounter

func serveChaos(latency time.Duration) (*chaosllm.Server, string, func(), error) {
	var sc chaosllm.Scenario
	if latency > 0 {
		sc.Phases = []chaosllm.Phase{{Name: "steady", Latency: chaosllm.Fixed(latency)}}
	}
	srv, err := chaosllm.New(sc, chaosllm.Options{})
	if err != nil {
		return nil, "", nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, "", nil, err
	}
	hs := &http.Server{Handler: srv, ReadHeaderTimeout: 5 * time.Second, ConnState: chaosConns.Count}
	go func() { _ = hs.Serve(ln) }()
	return srv, "http://" + ln.Addr().String(), func() { hs.Close() }, nil
}
