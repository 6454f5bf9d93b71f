package inject

import (
	"bytes"
	"container/list"
	"encoding/json"
	"hash/maphash"
	"slices"
	"sync"

	"github.com/factgate/factgate/knowledge"
)

// DefaultCacheSize bounds each route's cache of composed prompts. An entry is one
// (effective set, scopes, contract on/off, custom prompt, rules) combination; an
// overlay reload makes a new effective set, so its prompts are new entries and the
// old ones age out.
const DefaultCacheSize = 128

// promptKey identifies a composed prompt: the effective set (a new pointer after
// every overlay reload; nil when the custom prompt replaces the knowledge) and a
// hash of everything else. Entries compare the inputs themselves on a hit, so a hash
// collision can never serve the wrong prompt.
type promptKey struct {
	set  *knowledge.Set
	hash uint64
}

// promptInputs are what a composed prompt depends on besides the set.
type promptInputs struct {
	scopes    knowledge.Scopes // the set's dimensions only; nil with a custom prompt
	custom    string
	useCustom bool
	contract  bool
	rules     string
}

// prompt is one composed system prompt, ready to splice into a request.
type prompt struct {
	key    promptKey
	in     promptInputs
	scopes [][]string // in.scopes per set dimension, copied

	// text is the composed prompt without the client's part (Compose without
	// ClientSystem).
	text string
	// head is the system message's JSON up to and including the escaped text:
	// {"role":"system","content":"<text>   — the closing `"}` is added per request.
	head []byte
	// mergeLead is the JSON-escaped separator and heading that precede merged
	// client texts.
	mergeLead []byte
}

var promptSeed = maphash.MakeSeed()

func (in *promptInputs) hash(set *knowledge.Set) uint64 {
	var h maphash.Hash
	h.SetSeed(promptSeed)
	if set != nil {
		for _, dim := range set.Dimensions {
			for _, v := range in.scopes[dim] {
				h.WriteString(v)
				h.WriteByte(0)
			}
			h.WriteByte(1)
		}
	}
	h.WriteString(in.custom)
	h.WriteByte(0)
	h.WriteString(in.rules)
	var flags byte
	if in.contract {
		flags |= 1
	}
	if in.useCustom {
		flags |= 2
	}
	h.WriteByte(flags)
	return h.Sum64()
}

func (p *prompt) matches(set *knowledge.Set, in *promptInputs) bool {
	if p.in.contract != in.contract || p.in.useCustom != in.useCustom || p.in.custom != in.custom || p.in.rules != in.rules {
		return false
	}
	if set != nil {
		for i, dim := range set.Dimensions {
			if !slices.Equal(p.scopes[i], in.scopes[dim]) {
				return false
			}
		}
	}
	return true
}

// promptCache is a bounded LRU of composed prompts, safe for concurrent use.
type promptCache struct {
	capacity int
	mu       sync.Mutex
	items    map[promptKey]*list.Element
	lru      *list.List // front = most recently used
}

func newPromptCache(capacity int) *promptCache {
	if capacity <= 0 {
		capacity = DefaultCacheSize
	}
	return &promptCache{capacity: capacity, items: make(map[promptKey]*list.Element, capacity), lru: list.New()}
}

// get returns the cached prompt for the inputs, or builds it with build and keeps it.
func (c *promptCache) get(set *knowledge.Set, in *promptInputs, heading string, build func() string) *prompt {
	key := promptKey{set: set, hash: in.hash(set)}
	c.mu.Lock()
	if el, ok := c.items[key]; ok {
		if p := el.Value.(*prompt); p.matches(set, in) {
			c.lru.MoveToFront(el)
			c.mu.Unlock()
			return p
		}
	}
	c.mu.Unlock()

	text := build()
	p := &prompt{key: key, in: *in, text: text}
	p.in.scopes = nil
	if set != nil {
		p.scopes = make([][]string, len(set.Dimensions))
		for i, dim := range set.Dimensions {
			p.scopes[i] = slices.Clone(in.scopes[dim])
		}
	}
	p.head = append([]byte(`{"role":"system","content":"`), jsonStringInner(text)...)
	p.mergeLead = jsonStringInner(mergeLead(text != "", heading))

	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.items[key]; ok {
		el.Value = p
		c.lru.MoveToFront(el)
		return p
	}
	c.items[key] = c.lru.PushFront(p)
	for c.lru.Len() > c.capacity {
		old := c.lru.Back()
		c.lru.Remove(old)
		delete(c.items, old.Value.(*prompt).key)
	}
	return p
}

// len returns the number of cached prompts.
func (c *promptCache) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lru.Len()
}

// jsonStringInner returns s as the inside of a JSON string (without the quotes),
// with non-ASCII text kept as UTF-8 and no HTML escaping, so the prompt reads as
// written in the upstream's logs.
func jsonStringInner(s string) []byte {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s) // a string always encodes
	b := bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
	return b[1 : len(b)-1]
}
