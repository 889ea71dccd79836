package flow

import (
	"errors"
	"io"
	"net"
	"strings"
)

// Unavailable reports whether err says Redis did not answer (a read that
// may be tried again): ErrUnavailable, or the connection's own failure.
func Unavailable(err error) bool {
	return errors.Is(err, ErrUnavailable) || RedisUnavailable(err)
}

// RedisUnavailable reports an error that says Redis could not be reached
// or is still loading its data, as opposed to an answer.
func RedisUnavailable(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		strings.HasPrefix(err.Error(), "LOADING ") || strings.Contains(err.Error(), "LOADING Redis is loading")
}

// ErrUnavailable wraps a read that failed because Redis did not answer
// (refused, reset, timed out, loading): the workflow goes on, only its
// state could not be read. Wait returns it at once; a caller that waits
// through outages (enqueue --wait) calls Wait again.
var ErrUnavailable = errors.New("redis is not answering")
