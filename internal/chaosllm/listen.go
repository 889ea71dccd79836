package chaosllm

import (
	"context"
	"errors"
	"net"
	"net/http"
	"time"
)

// Serve serves srv on addr until ctx ends. While a timeline is in a refuse
// phase the listening socket is closed, so new connections are refused,
// and it is opened again on the same address when the phase ends. ready,
// if not nil, is called once with the address.
func Serve(ctx context.Context, addr string, srv *Server, ready func(net.Addr)) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	addr = ln.Addr().String() // a :0 port stays the same across reopenings
	hs := &http.Server{Handler: srv, ReadHeaderTimeout: 10 * time.Second}
	errc := make(chan error, 1)
	serve := func(l net.Listener) {
		go func() {
			if err := hs.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) && !errors.Is(err, net.ErrClosed) {
				select {
				case errc <- err:
				default:
				}
			}
		}()
	}
	serve(ln)
	if ready != nil {
		ready(ln.Addr())
	}
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	open := true
	for {
		select {
		case <-ctx.Done():
			sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
			defer cancel()
			if err := hs.Shutdown(sctx); err != nil {
				return hs.Close()
			}
			return nil
		case err := <-errc:
			_ = hs.Close()
			return err
		case <-tick.C:
			refusing := srv.Refusing()
			switch {
			case refusing && open:
				_ = ln.Close()
				open = false
				srv.logger.Info("refusing connections", "addr", addr)
			case !refusing && !open:
				if l, err := net.Listen("tcp", addr); err == nil {
					ln, open = l, true
					serve(ln)
					srv.logger.Info("accepting connections again", "addr", addr)
				}
			}
		}
	}
}
