package knowledge

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fsnotify/fsnotify"
)

// DefaultOverlayDebounce is how long the watcher waits after the last change in
// the overlay's folder before it reloads: editors write a file in several steps.
const DefaultOverlayDebounce = 150 * time.Millisecond

// WatchOptions configure an OverlayWatcher.
type WatchOptions struct {
	// Debounce is the quiet time before a reload. Zero means DefaultOverlayDebounce.
	Debounce time.Duration
	// Logger receives reload results. Nil means slog.Default().
	Logger *slog.Logger
}

// OverlayStatus is the state of an overlay, for /readyz.
type OverlayStatus struct {
	// Set is the name of the knowledge set the overlay applies to.
	Set string `json:"set"`
	// Path is the overlay file.
	Path string `json:"path"`
	// Version counts successful loads: 1 after the first, then one more for every
	// reload that changed the effective set.
	Version uint64 `json:"version"`
	// Present reports whether the overlay file existed at the last successful load
	// (false: the effective set is the built-in set alone).
	Present bool `json:"present"`
	// LoadedAt is when the effective set was last replaced.
	LoadedAt time.Time `json:"loaded_at"`
	// LastError is why the latest reload failed; "" when it succeeded. While it is
	// set, the last good version stays in effect.
	LastError string `json:"last_error,omitempty"`
	// LastErrorAt is when LastError happened.
	LastErrorAt time.Time `json:"last_error_at,omitzero"`
}

// OverlayWatcher keeps the effective knowledge set — a built-in set plus the user's
// overlay file — current. It watches the overlay's folder (not the file: editors
// and config managers replace files by renaming, which a watch on the file itself
// would lose), waits for changes to settle, and reloads. An invalid overlay keeps
// the last good version in effect, logs why, and shows in Status. A removed overlay
// file leaves the built-in set alone in effect.
//
// Methods are safe for concurrent use. Set is one atomic load: call it per request.
type OverlayWatcher struct {
	base     *Set
	path     string
	debounce time.Duration
	log      *slog.Logger

	cur atomic.Pointer[Set]

	mu       sync.Mutex // serialises reloads and guards status and lastData
	status   OverlayStatus
	lastData []byte // the applied overlay's bytes; nil when absent

	fs        *fsnotify.Watcher
	done      chan struct{}
	stopped   chan struct{}
	closeOnce sync.Once
}

// WatchOverlay loads the overlay at path onto base and starts watching it. A missing
// file is not an error (the built-in set alone is in effect until it appears); an
// invalid one is, so that a broken overlay surfaces at start-up, not on the first
// request. The overlay's folder must exist. Call Close to stop watching.
func WatchOverlay(base *Set, path string, opt WatchOptions) (*OverlayWatcher, error) {
	w := &OverlayWatcher{
		base:     base,
		path:     path,
		debounce: opt.Debounce,
		log:      opt.Logger,
		done:     make(chan struct{}),
		stopped:  make(chan struct{}),
	}
	if w.debounce <= 0 {
		w.debounce = DefaultOverlayDebounce
	}
	if w.log == nil {
		w.log = slog.Default()
	}
	w.status = OverlayStatus{Set: base.Name, Path: path}
	if err := w.Reload(); err != nil {
		return nil, err
	}
	fw, err := fsnotify.NewWatcher()
	if err != nil {
		return nil, fmt.Errorf("watching overlay %s: %w", path, err)
	}
	if err := fw.Add(filepath.Dir(path)); err != nil {
		fw.Close()
		return nil, fmt.Errorf("watching overlay %s: folder %s: %w", path, filepath.Dir(path), err)
	}
	w.fs = fw
	go w.loop()
	return w, nil
}

// Set returns the effective set (never nil).
func (w *OverlayWatcher) Set() *Set { return w.cur.Load() }

// Status returns the overlay's state.
func (w *OverlayWatcher) Status() OverlayStatus {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.status
}

// Reload reads the overlay now. When the file's content changed and is valid, the
// effective set is replaced and the version counts up; when it is invalid, the last
// good version stays and the error is returned, logged and shown in Status.
func (w *OverlayWatcher) Reload() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	data, err := os.ReadFile(w.path)
	present := err == nil
	switch {
	case errors.Is(err, fs.ErrNotExist):
		data = nil
	case err != nil:
		return w.failed(fmt.Errorf("reading overlay %s: %w", w.path, err))
	}
	if w.status.Version > 0 && present == w.status.Present && bytes.Equal(data, w.lastData) {
		w.status.LastError, w.status.LastErrorAt = "", time.Time{}
		return nil // an event that did not change the content
	}
	src := data
	if !present {
		src = []byte("{}")
	}
	set, err := w.base.WithOverlay(src, w.path)
	if err != nil {
		return w.failed(fmt.Errorf("overlay for knowledge set %q: %w", w.base.Name, err))
	}
	w.status.Version++
	set.Version = w.status.Version
	w.cur.Store(set)
	w.lastData = data
	w.status.Present = present
	w.status.LoadedAt = time.Now()
	w.status.LastError, w.status.LastErrorAt = "", time.Time{}
	w.log.Info("knowledge overlay loaded", "set", w.base.Name, "path", w.path, "present", present, "version", w.status.Version)
	return nil
}

// failed records a failed reload; mu is held.
func (w *OverlayWatcher) failed(err error) error {
	w.status.LastError = err.Error()
	w.status.LastErrorAt = time.Now()
	if w.status.Version > 0 {
		w.log.Warn("knowledge overlay rejected; keeping the last good version", "set", w.base.Name, "path", w.path, "version", w.status.Version, "error", err.Error())
	}
	return err
}

func (w *OverlayWatcher) loop() {
	defer close(w.stopped)
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	for {
		select {
		case <-w.done:
			return
		case _, ok := <-w.fs.Events:
			if !ok {
				return
			}
			// Any change in the folder may be the overlay: a rename onto it, or a
			// symlink swap (Kubernetes ConfigMaps). Reloading an unchanged file is a
			// no-op, so there is no need to guess.
			timer.Reset(w.debounce)
		case err, ok := <-w.fs.Errors:
			if !ok {
				return
			}
			w.log.Warn("knowledge overlay watch error", "path", w.path, "error", err.Error())
			timer.Reset(w.debounce)
		case <-timer.C:
			_ = w.Reload() // logged and kept in Status
		}
	}
}

// Close stops watching. The effective set stays readable.
func (w *OverlayWatcher) Close() error {
	var err error
	w.closeOnce.Do(func() {
		close(w.done)
		err = w.fs.Close()
		<-w.stopped
	})
	return err
}
