package knowledge

import (
	"strings"
	"sync"
)

// Bounds of a rule's line memo: the header lines of the logs a route sees recur
// (the same "Mod:", "地图:" and "玩家:" lines request after request), and a few
// hundred of them cover a deployment's traffic; a longer line is not a header.
const (
	lineMemoEntries = 256
	lineMemoMaxLine = 256
)

// lineMemo remembers a context rule's verdict on the lines it has judged, so that
// a recurring header line costs a map lookup instead of a regex run. It belongs
// to one compiled rule (LoadPack makes it with the rule), so a reloaded pack
// starts with empty memos and no verdict outlives the rule that gave it. It is
// safe for concurrent use; a nil memo remembers nothing. Once full, each new line
// evicts an arbitrary one (Go's map iteration order), which keeps the memory
// bounded whatever the lines.
type lineMemo[V any] struct {
	mu      sync.RWMutex
	verdict map[string]V
}

func newLineMemo[V any]() *lineMemo[V] {
	return &lineMemo[V]{verdict: make(map[string]V, lineMemoEntries)}
}

// get returns the verdict remembered for line.
func (m *lineMemo[V]) get(line string) (V, bool) {
	if m == nil || len(line) > lineMemoMaxLine {
		var zero V
		return zero, false
	}
	m.mu.RLock()
	v, ok := m.verdict[line]
	m.mu.RUnlock()
	return v, ok
}

// put remembers the verdict on line. The line is copied: it may alias a request
// buffer. The verdict must not alias one either, and is shared by every later
// request with the same line: it must not be modified.
func (m *lineMemo[V]) put(line string, v V) {
	if m == nil || len(line) > lineMemoMaxLine {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.verdict[line]; ok {
		return
	}
	if len(m.verdict) >= lineMemoEntries {
		for old := range m.verdict {
			delete(m.verdict, old)
			break
		}
	}
	m.verdict[strings.Clone(line)] = v
}

// valueVerdict is a value rule's verdict on a line: the value it extracts,
// mapped, when it matches.
type valueVerdict struct {
	value   string
	matched bool
}

// playersVerdict is a players rule's verdict on a line: the players in it (nil
// when it is not a players line, or names none).
type playersVerdict struct {
	players []Player
}
