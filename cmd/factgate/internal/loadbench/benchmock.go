package loadbench

import (
	"bytes"
	"context"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/factgate/factgate/proxy/mockupstream"
)

// mockListening is what "factgate mock-upstream" prints once it listens.
const mockListening = "mock upstream listening: base URL "

// startChildMock writes script to a temporary file and starts "exe mock-upstream" on
// a free loopback port, so that the mock upstream has a process of its own and does
// not share the load driver's CPU scheduling and heap. It returns the child and the
// mock's base URL (http://127.0.0.1:PORT/v1).
func startChildMock(ctx context.Context, exe string, script *mockupstream.Script, chunkSize int) (*benchChild, string, error) {
	data, err := yaml.Marshal(script)
	if err != nil {
		return nil, "", fmt.Errorf("encoding the mock script: %w", err)
	}
	dir, err := os.MkdirTemp("", "factgate-bench-mock-")
	if err != nil {
		return nil, "", err
	}
	path := filepath.Join(dir, "script.yaml")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		_ = os.RemoveAll(dir)
		return nil, "", err
	}
	cmd := exec.Command(exe, "mock-upstream", "--listen", "127.0.0.1:0", "--script", path, "--chunk-size", fmt.Sprint(chunkSize))
	out := &announceWriter{prefix: mockListening, found: make(chan string, 1)}
	cmd.Stdout = out
	cmd.Stderr = out
	if err := cmd.Start(); err != nil {
		_ = os.RemoveAll(dir)
		return nil, "", fmt.Errorf("starting the mock upstream: %w", err)
	}
	child := &benchChild{cmd: cmd, dir: dir}
	select {
	case u := <-out.found:
		if _, err := url.Parse(u); err != nil {
			child.stop()
			return nil, "", fmt.Errorf("the mock upstream announced %q: %w", u, err)
		}
		return child, u, nil
	case <-time.After(15 * time.Second):
	case <-ctx.Done():
	}
	child.stop()
	return nil, "", fmt.Errorf("the mock upstream did not start:\n%s", out.String())
}

// announceWriter collects a child's output and sends the rest of the first line that
// starts with prefix on found.
type announceWriter struct {
	prefix string
	found  chan string
	mu     sync.Mutex
	buf    bytes.Buffer
	sent   bool
}

func (w *announceWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.buf.Len() < 64<<10 {
		w.buf.Write(p)
	}
	if !w.sent {
		// Only complete lines: the URL may arrive in more than one write.
		s := w.buf.String()
		if i := strings.LastIndexByte(s, '\n'); i >= 0 {
			for _, line := range strings.Split(s[:i], "\n") {
				if rest, ok := strings.CutPrefix(line, w.prefix); ok {
					w.found <- strings.TrimSpace(rest)
					w.sent = true
					break
				}
			}
		}
	}
	return len(p), nil
}

func (w *announceWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}

// hostOf is the HOST:PORT of a base URL.
func hostOf(base string) string {
	u, err := url.Parse(base)
	if err != nil {
		return ""
	}
	return u.Host
}
