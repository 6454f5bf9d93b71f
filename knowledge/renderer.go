package knowledge

import (
	"container/list"
	"hash/maphash"
	"slices"
	"sync"
	"sync/atomic"
)

// DefaultRenderCacheSize is the render cache's capacity when none is given.
const DefaultRenderCacheSize = 256

// Renderer renders knowledge with a bounded LRU cache, so that the hot path does not
// re-render: a render is cached per (set, scopes). Every distinct Set value —
// including each effective set an overlay reload produces — has its own cache
// identity, so a reload never serves a stale prompt; the old renders age out.
//
// A Renderer is safe for concurrent use. The zero value is not usable; use
// NewRenderer.
type Renderer struct {
	capacity int
	mu       sync.Mutex
	items    map[renderKey]*list.Element
	lru      *list.List // front = most recently used

	hits, misses atomic.Uint64
}

type renderKey struct{ serial, hash uint64 }

type renderItem struct {
	key    renderKey
	scopes [][]string // the selected values per set dimension, to rule out hash collisions
	text   string
}

var renderSeed = maphash.MakeSeed()

// NewRenderer returns a Renderer that keeps at most capacity renders (zero or less
// means DefaultRenderCacheSize).
func NewRenderer(capacity int) *Renderer {
	if capacity <= 0 {
		capacity = DefaultRenderCacheSize
	}
	return &Renderer{capacity: capacity, items: make(map[renderKey]*list.Element, capacity), lru: list.New()}
}

// Render returns Render(set, scopes), from the cache when it has it. Only the
// set's dimensions take part in the key: other dimensions do not change the render.
func (r *Renderer) Render(set *Set, scopes Scopes) string {
	key := renderKey{serial: set.serial, hash: scopesHash(set, scopes)}
	r.mu.Lock()
	if el, ok := r.items[key]; ok {
		it := el.Value.(*renderItem)
		if sameScopes(set, it.scopes, scopes) {
			r.lru.MoveToFront(el)
			r.mu.Unlock()
			r.hits.Add(1)
			return it.text
		}
	}
	r.mu.Unlock()
	r.misses.Add(1)

	text := Render(set, scopes)
	it := &renderItem{key: key, scopes: make([][]string, len(set.Dimensions)), text: text}
	for i, dim := range set.Dimensions {
		it.scopes[i] = slices.Clone(scopes[dim])
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if el, ok := r.items[key]; ok {
		el.Value = it
		r.lru.MoveToFront(el)
		return text
	}
	r.items[key] = r.lru.PushFront(it)
	for r.lru.Len() > r.capacity {
		old := r.lru.Back()
		r.lru.Remove(old)
		delete(r.items, old.Value.(*renderItem).key)
	}
	return text
}

// RenderStats counts the cache's hits and misses and its current size.
type RenderStats struct {
	Hits, Misses uint64
	Size         int
}

// Stats returns the cache's counters.
func (r *Renderer) Stats() RenderStats {
	r.mu.Lock()
	n := r.lru.Len()
	r.mu.Unlock()
	return RenderStats{Hits: r.hits.Load(), Misses: r.misses.Load(), Size: n}
}

func scopesHash(set *Set, scopes Scopes) uint64 {
	var h maphash.Hash
	h.SetSeed(renderSeed)
	for _, dim := range set.Dimensions {
		for _, v := range scopes[dim] {
			h.WriteString(v)
			h.WriteByte(0)
		}
		h.WriteByte(1)
	}
	return h.Sum64()
}

func sameScopes(set *Set, stored [][]string, scopes Scopes) bool {
	for i, dim := range set.Dimensions {
		if !slices.Equal(stored[i], scopes[dim]) {
			return false
		}
	}
	return true
}
