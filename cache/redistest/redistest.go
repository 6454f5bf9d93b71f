// Package redistest starts throwaway redis-server processes for tests that must
// stop or break Redis. The machine's shared Redis is never touched: each server
// listens on its own port and is killed when the test ends.
package redistest

import (
	"context"
	"net"
	"os/exec"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// Server is a redis-server a test owns.
type Server struct {
	// Port is the server's port on 127.0.0.1.
	Port int
	cmd  *exec.Cmd
}

// Start runs redis-server on 127.0.0.1:port (a free port when port is 0) keeping
// nothing on disk, waits until it answers, and kills it when the test ends. It
// skips the test when redis-server is not installed.
func Start(t testing.TB, port int) *Server {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		t.Skip("redis-server is not installed; skipping a test that stops Redis")
	}
	if port == 0 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		port = l.Addr().(*net.TCPAddr).Port
		_ = l.Close()
	}
	s := &Server{Port: port}
	s.cmd = exec.Command(bin, "--port", strconv.Itoa(port), "--save", "", "--appendonly", "no", "--bind", "127.0.0.1")
	if err := s.cmd.Start(); err != nil {
		t.Fatalf("starting redis-server: %v", err)
	}
	t.Cleanup(s.Kill)
	client := redis.NewClient(&redis.Options{Addr: s.Addr(), MaxRetries: -1})
	defer client.Close()
	deadline := time.Now().Add(10 * time.Second)
	for client.Ping(context.Background()).Err() != nil {
		if time.Now().After(deadline) {
			t.Fatalf("redis-server on %s did not answer within 10s", s.Addr())
		}
		time.Sleep(10 * time.Millisecond)
	}
	return s
}

// Addr returns "127.0.0.1:port".
func (s *Server) Addr() string { return "127.0.0.1:" + strconv.Itoa(s.Port) }

// Freeze stops the server with SIGSTOP: it keeps its connections open and
// answers nothing — a hung Redis. Thaw resumes it; the test's end kills it
// either way.
func (s *Server) Freeze() {
	if s.cmd.Process != nil && s.cmd.ProcessState == nil {
		_ = s.cmd.Process.Signal(syscall.SIGSTOP)
	}
}

// Thaw resumes a frozen server with SIGCONT.
func (s *Server) Thaw() {
	if s.cmd.Process != nil && s.cmd.ProcessState == nil {
		_ = s.cmd.Process.Signal(syscall.SIGCONT)
	}
}

// Kill stops the server at once (idempotent).
func (s *Server) Kill() {
	if s.cmd.Process != nil && s.cmd.ProcessState == nil {
		_ = s.cmd.Process.Kill()
		_ = s.cmd.Wait()
	}
}
