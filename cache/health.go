package cache

import (
	"sync"
	"sync/atomic"
)

// health is a backend's degraded flag and latest error. The healthy path costs one
// atomic load.
type health struct {
	degraded atomic.Bool
	mu       sync.Mutex
	lastErr  string
}

// fail marks the backend degraded with message and reports whether it was healthy
// before (the moment to log).
func (h *health) fail(message string) (wasHealthy bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.lastErr = message
	return !h.degraded.Swap(true)
}

// succeed clears the degraded flag and reports whether it was set (the moment to
// log a recovery).
func (h *health) succeed() (recovered bool) {
	if !h.degraded.Load() {
		return false
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.degraded.Swap(false) {
		return false
	}
	h.lastErr = ""
	return true
}

// status renders the state for backend.
func (h *health) status(backend string) Status {
	h.mu.Lock()
	defer h.mu.Unlock()
	return Status{Backend: backend, Degraded: h.degraded.Load(), LastError: h.lastErr}
}
