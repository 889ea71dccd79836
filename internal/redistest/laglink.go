package redistest

import (
	"io"
	"net"
	"strconv"
	"sync"
	"testing"
)

// LagLink is a TCP relay on a loopback port between a replica and its
// primary, that the test controls: the replica is started with
// --replicaof 127.0.0.1 <Port> and the link forwards to the primary. It
// passes everything through until Stall; from then on it goes on reading
// the primary's replication stream (the primary is never blocked and
// takes writes as before) but hands the replica none of it, so the
// replica really lags: its acknowledged offset (REPLCONF ACK, always
// forwarded) stays where the stall found it, and WAIT does not count it
// for anything written since. Cut drops what was held back and closes
// both sides: a replica whose link lagged when its primary died never
// gets the tail. (Freezing a replica cannot do that on one machine: the
// kernel keeps the stream for it, and it has every byte once thawed.)
type LagLink struct {
	Port   int
	ln     net.Listener
	target string

	mu      sync.Mutex
	stalled bool
	cut     bool
	held    int64 // bytes of the primary's stream held back since Stall
	conns   []net.Conn
}

// NewLagLink listens on a free loopback port and relays every connection
// made to it to target (the primary's host:port). Everything is closed at
// the end of the test.
func NewLagLink(tb testing.TB, target string) *LagLink {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	l := &LagLink{Port: ln.Addr().(*net.TCPAddr).Port, ln: ln, target: target}
	tb.Cleanup(l.Cut)
	go l.accept()
	return l
}

// Addr is the link's host:port, for --replicaof.
func (l *LagLink) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(l.Port)) }

// Stall stops handing the primary's stream to the replica: what the
// primary sends from now on is read and held back.
func (l *LagLink) Stall() {
	l.mu.Lock()
	l.stalled = true
	l.mu.Unlock()
}

// Held is how many bytes of the primary's stream the link has held back
// since Stall: how far the replica lags.
func (l *LagLink) Held() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.held
}

// Cut drops what was held back and closes both sides of every connection
// and the link's port: the replica never gets the tail, and cannot
// connect through the link again.
func (l *LagLink) Cut() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.cut {
		return
	}
	l.cut = true
	_ = l.ln.Close()
	for _, c := range l.conns {
		_ = c.Close()
	}
	l.conns = nil
}

func (l *LagLink) accept() {
	for {
		replica, err := l.ln.Accept()
		if err != nil {
			return // cut
		}
		primary, err := net.Dial("tcp", l.target)
		if err != nil {
			_ = replica.Close() // the primary is away: the replica tries again
			continue
		}
		l.mu.Lock()
		if l.cut {
			l.mu.Unlock()
			_ = replica.Close()
			_ = primary.Close()
			return
		}
		l.conns = append(l.conns, replica, primary)
		l.mu.Unlock()
		go l.replies(replica, primary)
		go l.stream(primary, replica)
	}
}

// replies forwards what the replica sends (PSYNC, REPLCONF ACK) to the
// primary, stalled or not.
func (l *LagLink) replies(replica, primary net.Conn) {
	_, _ = io.Copy(primary, replica)
	_ = primary.Close()
	_ = replica.Close()
}

// stream forwards the primary's stream to the replica until Stall, and
// then keeps it from the replica (counted in held; no Resume, so
// nothing of it is ever delivered).
func (l *LagLink) stream(primary, replica net.Conn) {
	defer func() { _ = replica.Close(); _ = primary.Close() }()
	buf := make([]byte, 32<<10)
	for {
		n, err := primary.Read(buf)
		if n > 0 {
			l.mu.Lock()
			stalled := l.stalled
			if stalled {
				l.held += int64(n)
			}
			l.mu.Unlock()
			if !stalled {
				if _, werr := replica.Write(buf[:n]); werr != nil {
					return
				}
			}
		}
		if err != nil {
			return // the primary is gone, or the link cut
		}
	}
}
