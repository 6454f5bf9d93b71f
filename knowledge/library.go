package knowledge

import (
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"time"
)

// LibraryOptions configure a Library.
type LibraryOptions struct {
	// Overlays maps a knowledge set name to its user overlay file. Nil: no overlays.
	Overlays map[string]string
	// RenderCacheSize bounds the render cache; zero means DefaultRenderCacheSize.
	RenderCacheSize int
	// Debounce is the overlay watchers' quiet time; zero means the default.
	Debounce time.Duration
	// Logger receives overlay reloads; nil means slog.Default().
	Logger *slog.Logger
}

// Library is what the request path uses: the registry's packs, each set with its
// user overlay applied and kept current, and a render cache. It is safe for
// concurrent use; build one at start-up and Close it at shutdown.
type Library struct {
	reg      *Registry
	watchers map[string]*OverlayWatcher
	renderer *Renderer
}

// NewLibrary watches the configured overlays on top of the registry's sets. An
// overlay for a set the registry does not have, or an invalid overlay file, is an
// error (see WatchOverlay); a missing overlay file is not.
func NewLibrary(reg *Registry, opt LibraryOptions) (*Library, error) {
	l := &Library{reg: reg, watchers: map[string]*OverlayWatcher{}, renderer: NewRenderer(opt.RenderCacheSize)}
	names := make([]string, 0, len(opt.Overlays))
	for name := range opt.Overlays {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		base, _ := reg.Set(name)
		if base == nil {
			l.Close()
			return nil, fmt.Errorf("overlay %s: unknown knowledge set %q (known: %v)", opt.Overlays[name], name, reg.SetNames())
		}
		w, err := WatchOverlay(base, opt.Overlays[name], WatchOptions{Debounce: opt.Debounce, Logger: opt.Logger})
		if err != nil {
			l.Close()
			return nil, err
		}
		l.watchers[name] = w
	}
	return l, nil
}

// Registry returns the library's registry.
func (l *Library) Registry() *Registry { return l.reg }

// Set returns the effective set with that name (the built-in or user pack's set
// with its overlay applied) and its pack; nil, nil for an unknown name.
func (l *Library) Set(name string) (*Set, *Pack) {
	set, p := l.reg.Set(name)
	if w := l.watchers[name]; w != nil {
		set = w.Set()
	}
	return set, p
}

// Render returns the rendered knowledge of the effective set for the scopes, from
// the render cache when possible; ok is false for an unknown set.
func (l *Library) Render(name string, scopes Scopes) (text string, ok bool) {
	set, _ := l.Set(name)
	if set == nil {
		return "", false
	}
	return l.renderer.Render(set, scopes), true
}

// Renderer returns the library's render cache (for its statistics).
func (l *Library) Renderer() *Renderer { return l.renderer }

// OverlayStatus returns the state of every configured overlay, by set name order,
// for /readyz. An overlay whose LastError is set is degraded: its last good version
// is in effect.
func (l *Library) OverlayStatus() []OverlayStatus {
	out := make([]OverlayStatus, 0, len(l.watchers))
	for _, w := range l.watchers {
		out = append(out, w.Status())
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Set < out[j].Set })
	return out
}

// Close stops the overlay watchers.
func (l *Library) Close() error {
	var errs []error
	for _, w := range l.watchers {
		errs = append(errs, w.Close())
	}
	return errors.Join(errs...)
}
