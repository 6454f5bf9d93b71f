package facts

import (
	"context"
	"encoding/binary"
	"fmt"
	"hash/maphash"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/factgate/factgate/cache"
	"github.com/factgate/factgate/interceptors/reqcontext"
)

// Where a request's fact index came from: Info.Source and the source label of
// factgate_fact_index_total.
const (
	// SourceMemory: the in-process tier held the decoded index, or another request
	// in this process was resolving the same key at the same moment and shared its
	// result (single flight).
	SourceMemory = "memory"
	// SourceShared: the shared cache (Redis, when configured) held the encoded
	// index; it was decoded and kept in memory.
	SourceShared = "shared"
	// SourceBuilt: no tier held it; it was extracted from the request's text and
	// written back to both tiers.
	SourceBuilt = "built"
)

// SharedKeyPrefix prefixes a fact key in the shared cache: the encoded index of
// key k is stored under SharedKeyPrefix + k (the cache adds its own versioned
// prefix in Redis).
const SharedKeyPrefix = "facts:"

// mergedKeyPrefix prefixes the in-process key of a merged session index, so it
// never meets a fact key (32 hex digits) in the memory tier.
const mergedKeyPrefix = "merged:"

// store resolves fact indexes through the three tiers — the in-process LRU of
// decoded indexes, the shared cache of encoded ones, and extraction — with single
// flight, so concurrent requests for one key resolve it once. It is safe for
// concurrent use.
type store struct {
	extractor  *Extractor
	keyVersion string
	memory     *cache.LRU[string, memoryEntry]
	shared     cache.Cache
	ttl        time.Duration
	keys       *keyMemo
	flight     cache.Flight[resolved]
	// observeBuild records one extraction's duration (the build histogram).
	observeBuild func(time.Duration)
	log          *slog.Logger
	// writes tracks write-backs to the shared cache still running.
	writes sync.WaitGroup
}

// memoryEntry is a decoded index in the memory tier with its estimated heap size.
type memoryEntry struct {
	ix   *Index
	size int64
}

// resolved is the outcome of resolving one key.
type resolved struct {
	ix     *Index
	source string
	build  time.Duration
	// note explains a problem that was worked around (a shared entry that did not
	// decode), for the trace.
	note string
}

func newStore(x *Extractor, keyVersion string, shared cache.Cache, s settings, observeBuild func(time.Duration), log *slog.Logger) *store {
	return &store{
		extractor:  x,
		keyVersion: keyVersion,
		memory: cache.NewLRU(cache.LRUOptions[string, memoryEntry]{
			MaxBytes:   s.memoryBytes,
			Size:       func(_ string, e memoryEntry) int64 { return e.size },
			DefaultTTL: s.ttl,
		}),
		shared:       shared,
		ttl:          s.ttl,
		keys:         newKeyMemo(keyMemoEntries),
		observeBuild: observeBuild,
		log:          log,
	}
}

// keyOf returns the fact key of the body's user texts — SourceKey(keyVersion,
// texts...), "" when the body has no user text — and a function that returns the
// texts, decoded on first use. The key is remembered per process by a fast digest
// of the raw user contents, so a repeated log is neither decoded nor hashed with
// SHA-256 again: only an index build needs the decoded texts.
func (s *store) keyOf(body []byte) (string, func() []string) {
	var texts []string
	decode := func() []string {
		if texts == nil {
			texts = reqcontext.UserTexts(body)
		}
		return texts
	}
	d, ok := s.keys.digest(body)
	if ok {
		if k, hit := s.keys.lru.Get(d); hit {
			return k, decode
		}
	}
	var k string
	if hasText(decode()) {
		k = SourceKey(s.keyVersion, texts...)
	}
	if ok {
		s.keys.lru.Put(d, k, 0)
	}
	return k, decode
}

// index returns the index under key: from memory, else from the shared cache, else
// built from texts (called only then). Callers that share another request's flight get
// SourceMemory: the index came from this process without a shared read or a build
// of their own.
func (s *store) index(ctx context.Context, key string, texts func() []string) (resolved, error) {
	if e, ok := s.memory.Get(key); ok {
		return resolved{ix: e.ix, source: SourceMemory}, nil
	}
	var led atomic.Bool
	r, _, err := s.flight.Do(ctx, "index:"+key, func(ctx context.Context) (resolved, error) {
		led.Store(true)
		// A flight for key may have finished between the Get above and this one.
		if e, ok := s.memory.Get(key); ok {
			return resolved{ix: e.ix, source: SourceMemory}, nil
		}
		ix, err := s.readShared(ctx, key)
		if ix != nil {
			return resolved{ix: ix, source: SourceShared}, nil
		}
		r := resolved{source: SourceBuilt}
		if err != nil {
			r.note = err.Error() + "; rebuilt from the request"
		}
		start := time.Now()
		ix, err = s.extractor.ExtractTexts(texts()...)
		r.build = time.Since(start)
		if err != nil {
			return resolved{}, err
		}
		if s.observeBuild != nil {
			s.observeBuild(r.build)
		}
		r.ix = ix
		s.remember(key, ix, textBytes(ix))
		s.writeBack(key, ix)
		return r, nil
	})
	if err != nil {
		return resolved{}, err
	}
	if !led.Load() {
		r = resolved{ix: r.ix, source: SourceMemory}
	}
	return r, nil
}

// load returns the index under key from memory or the shared cache, without
// building it (a session's other segments: their text is not in this request).
// It returns nil when neither tier has it; err explains a shared entry that could
// not be read or decoded.
func (s *store) load(ctx context.Context, key string) (*Index, string, error) {
	if e, ok := s.memory.Get(key); ok {
		return e.ix, SourceMemory, nil
	}
	r, _, err := s.flight.Do(ctx, "load:"+key, func(ctx context.Context) (resolved, error) {
		if e, ok := s.memory.Get(key); ok {
			return resolved{ix: e.ix, source: SourceMemory}, nil
		}
		ix, err := s.readShared(ctx, key)
		return resolved{ix: ix, source: SourceShared}, err
	})
	if r.ix == nil {
		return nil, "", err
	}
	return r.ix, r.source, nil
}

// readShared reads and decodes key's index from the shared cache and keeps it in
// memory. (nil, nil) is a miss; an error is a read or decode failure, which the
// caller treats as a miss.
func (s *store) readShared(ctx context.Context, key string) (*Index, error) {
	blob, ok, err := s.shared.Get(ctx, SharedKeyPrefix+key)
	if err != nil {
		return nil, fmt.Errorf("facts: reading %s%s from the shared cache: %w", SharedKeyPrefix, key, err)
	}
	if !ok {
		return nil, nil
	}
	ix, err := UnmarshalIndex(blob)
	if err != nil {
		return nil, fmt.Errorf("facts: shared cache entry %s%s (%d bytes) does not decode: %w", SharedKeyPrefix, key, len(blob), err)
	}
	// A decoded index keeps one copy of the blob; its strings are pieces of it.
	s.remember(key, ix, int64(len(blob)))
	return ix, nil
}

// writeBack encodes ix and stores it in the shared cache in the background: the
// waiting request has its index already, and a lost write is only a later rebuild.
func (s *store) writeBack(key string, ix *Index) {
	s.writes.Add(1)
	go func() {
		defer s.writes.Done()
		blob, _ := ix.MarshalBinary()
		if err := s.shared.Set(context.Background(), SharedKeyPrefix+key, blob, s.ttl); err != nil && s.log != nil {
			s.log.Warn("facts: writing the fact index to the shared cache", "key", SharedKeyPrefix+key, "bytes", len(blob), "error", err)
		}
	}()
}

// remember keeps ix in the memory tier; backing is the size of the string data
// its operations' texts live in.
func (s *store) remember(key string, ix *Index, backing int64) {
	s.memory.Put(key, memoryEntry{ix: ix, size: indexHeapBytes(ix, backing)}, 0)
}

// Per-operation heap cost of an index besides its text: the Op itself plus its
// entries in the derived lookup tables (per kind, per player, per asset or
// power, per unit mention), rounded up.
const (
	opHeapBytes      = int64(unsafe.Sizeof(Op{})) + 5*4
	unitMentionBytes = 8 + 4 + 4 // the UnitId in Op.Units, its unitOps entry, its slot lookup
	unitSlotBytes    = 48        // unitSlot map entry, unitIDs, unitStart
	indexBaseBytes   = 4 << 10
)

// indexHeapBytes estimates the heap an index holds: what its operations,
// derived tables and string data (backing bytes) take. It is what the memory
// tier's byte bound is charged; it is within a small factor of the truth, which
// is all a cache bound needs.
func indexHeapBytes(ix *Index, backing int64) int64 {
	n := indexBaseBytes + backing + int64(len(ix.ops))*opHeapBytes + int64(len(ix.unitIDs))*unitSlotBytes
	for i := range ix.ops {
		n += int64(len(ix.ops[i].Units)) * unitMentionBytes
	}
	return n
}

// textBytes returns the bytes of the operations' texts: the string data of a
// built index (player, asset and power are pieces of the same lines).
func textBytes(ix *Index) int64 {
	var n int64
	for i := range ix.ops {
		n += int64(len(ix.ops[i].Text)) + 1
	}
	return n
}

// keyMemoEntries bounds the fact keys remembered per process (~100 bytes each).
const keyMemoEntries = 1 << 16

// keyMemo remembers the fact keys of recently seen request bodies by a 128-bit
// digest of their user messages' raw JSON contents: two hash/maphash hashes with
// independent random seeds, plus the total length. maphash reads ~10 GB/s, against
// ~1.5 GB/s for SHA-256 and ~1.5 GB/s for decoding the JSON strings, so a repeated
// log costs a fraction of computing its key. The seeds are secret and new in every
// process, so nobody can craft bodies whose digests collide; by chance, two
// collide with probability about 2^-128 per pair. Equal raw contents decode to
// equal texts, so a hit is always the right key; texts written with other JSON
// escapes merely miss. The memo only shortcuts the key: the key itself (what the
// shared cache and sessions use) is always the SHA-256 SourceKey of the texts.
type keyMemo struct {
	seeds [2]maphash.Seed
	lru   *cache.LRU[textDigest, string]
}

type textDigest struct {
	h [2]uint64
	n int
}

func newKeyMemo(entries int) *keyMemo {
	return &keyMemo{
		seeds: [2]maphash.Seed{maphash.MakeSeed(), maphash.MakeSeed()},
		lru:   cache.NewLRU(cache.LRUOptions[textDigest, string]{MaxEntries: entries}),
	}
}

// digest hashes the raw contents of body's user messages as a sequence: one
// content is hashed whole; several are hashed each, and the (length, hash) pairs
// are hashed again, so that the split between messages counts. It reports false
// when body has no messages array (nothing worth remembering).
func (m *keyMemo) digest(body []byte) (textDigest, bool) {
	msgs, ok := reqcontext.FindMessages(body)
	if !ok {
		return textDigest{}, false
	}
	var contents [][]byte
	for _, msg := range msgs.Items {
		if msg.Role == "user" {
			contents = append(contents, msg.Content(body))
		}
	}
	var d textDigest
	for _, c := range contents {
		d.n += len(c)
	}
	for i, seed := range m.seeds {
		if len(contents) == 1 {
			d.h[i] = maphash.Bytes(seed, contents[0])
			continue
		}
		buf := make([]byte, 0, 16*len(contents))
		for _, c := range contents {
			buf = binary.LittleEndian.AppendUint64(buf, uint64(len(c)))
			buf = binary.LittleEndian.AppendUint64(buf, maphash.Bytes(seed, c))
		}
		d.h[i] = maphash.Bytes(seed, buf)
	}
	return d, true
}
