package mcptool

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// process is a stdio server's process.
type process struct {
	cmd    *exec.Cmd
	exited chan struct{}
	err    error // its Wait's, once exited
}

// dialStdio starts the server's command and makes MCP's handshake over its
// stdin and stdout; its stderr goes to the log.
func (s *server) dialStdio(ctx context.Context) (*conn, error) {
	var pipes [6]*os.File // stdin r, w; stdout r, w; stderr r, w
	for i := 0; i < 6; i += 2 {
		r, w, err := os.Pipe()
		if err != nil {
			closeAll(pipes[:])
			return nil, fmt.Errorf("start %s: %w", s.program(), err)
		}
		pipes[i], pipes[i+1] = r, w
	}
	cmd := exec.Command(s.cfg.Command[0], s.cfg.Command[1:]...)
	cmd.Env = s.env()
	cmd.Stdin, cmd.Stdout, cmd.Stderr = pipes[0], pipes[3], pipes[5]
	ownGroup(cmd)
	if err := cmd.Start(); err != nil {
		closeAll(pipes[:])
		return nil, fmt.Errorf("start %s: %w", s.program(), err)
	}
	closeAll([]*os.File{pipes[0], pipes[3], pipes[5]}) // the child's ends
	p := &process{cmd: cmd, exited: make(chan struct{})}
	logged := make(chan struct{})
	go func() { defer close(logged); logLines(pipes[4], s.name, s.o) }()
	go func() {
		<-logged // Wait after the last of stderr was read
		p.err = cmd.Wait()
		close(p.exited)
	}()
	frames := &frameLimit{max: maxFrameBytes(s.o.MaxResultBytes)}
	t := &mcp.IOTransport{Reader: frames.lines(pipes[2]), Writer: pipes[1], MaxLineLength: -1}
	sess, err := s.client.Connect(ctx, t, nil)
	if err != nil {
		p.stop(0)
		<-p.exited
		return nil, fmt.Errorf("%s: the MCP handshake failed (%s): %w", s.program(), p.state(), err)
	}
	c := &conn{sess: sess, proc: p, frames: frames, gone: make(chan struct{})}
	go func() {
		select {
		case <-p.exited:
			c.lost(fmt.Sprintf("its process %s", p.state()))
		case <-c.gone:
		}
	}()
	go c.watchSession()
	return c, nil
}

// program is the command's program, for messages (its arguments may hold
// what the log should not).
func (s *server) program() string { return filepath.Base(s.cfg.Command[0]) }

// env is the server's environment: PATH and HOME, and its env (which
// wins).
func (s *server) env() []string {
	var out []string
	for _, k := range []string{"PATH", "HOME"} {
		if _, mine := s.cfg.Env[k]; !mine {
			if v, ok := os.LookupEnv(k); ok {
				out = append(out, k+"="+v)
			}
		}
	}
	keys := make([]string, 0, len(s.cfg.Env))
	for k := range s.cfg.Env {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		out = append(out, k+"="+s.cfg.Env[k].Reveal())
	}
	return out
}

// state says whether the process exited, and how.
func (p *process) state() string {
	select {
	case <-p.exited:
		if p.err != nil {
			return "exited: " + strings.TrimPrefix(p.err.Error(), "exit status ")
		}
		return "exited"
	default:
		return "running"
	}
}

// stop waits up to grace for the process to exit (its stdin closed), then
// kills what is left of its group (itself, or what it started).
func (p *process) stop(grace time.Duration) {
	if grace > 0 {
		t := time.NewTimer(grace)
		defer t.Stop()
		select {
		case <-p.exited:
		case <-t.C:
		}
	}
	killGroup(p.cmd)
}

func closeAll(fs []*os.File) {
	for _, f := range fs {
		if f != nil {
			_ = f.Close()
		}
	}
}
