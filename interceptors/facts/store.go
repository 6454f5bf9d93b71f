package facts

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"log/slog"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/zeebo/xxh3"

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

// recordKeyPrefix prefixes the in-process key of a session record (the fact keys
// this replica saw in a session), before the session's set key.
const recordKeyPrefix = "record:"

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
	// observeEncoded records the size of an index written to the shared cache
	// (nil: not recorded).
	observeEncoded func(int)
	log            *slog.Logger
	// writes tracks write-backs to the shared cache still running.
	writes sync.WaitGroup
	// heavy bounds the index builds and shared-cache decodes running at once to
	// the CPUs the process may use: both are CPU-bound, so more at once only
	// multiplies the memory they hold (the decoded texts, the index being built)
	// without finishing any sooner.
	heavy chan struct{}
}

// memoryEntry is what the memory tier holds under one key, with its estimated heap
// size: a decoded index, or a session record.
type memoryEntry struct {
	ix *Index
	// published is set once the index is known to be in the shared cache in a way
	// that survives an outage: read from it, or written with cache.SetDurable. A
	// session naming the index publishes it first. Shared by copies of the entry.
	published *atomic.Bool
	// record is a session record (ix is nil).
	record *sessionRecord
	size   int64
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
	st := &store{
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
		heavy:        make(chan struct{}, max(1, runtime.GOMAXPROCS(0))),
		observeBuild: observeBuild,
		log:          log,
	}
	if d, ok := shared.(cache.Durable); ok {
		// A shared tier that comes back from an outage may have come back empty:
		// the sessions this replica knows are written back to it.
		d.OnRecover(st.republishSessions)
	}
	return st
}

// keyOf returns the fact key of the body's user texts — SourceKey(keyVersion,
// texts...), "" when the body has no user text — and a function that returns the
// texts, decoded on first use (see key). The function reads body, so body must
// stay as it is until the caller is done with it (the job holds the exchange's
// buffers: Exchange.Hold); the texts it returns are copies.
func (s *store) keyOf(body []byte) (string, func() requestTexts) {
	k, texts := s.key(body, foundMessages{})
	return k, s.lazyTexts(body, texts)
}

// requestTexts are what an index is extracted from: the user texts (the
// operations) and, when the rules declare records, the messages the record
// rules read.
type requestTexts struct {
	user     []string
	messages []RoleText
}

// key returns the fact key of the body's user texts (as keyOf) and, when it
// had to decode them to compute it, the texts; nil when the key came from the
// memo. The key is remembered per process by a fast digest of the raw user
// contents, so a repeated log is neither decoded nor hashed with SHA-256 again:
// only an index build needs the decoded texts. A repeated log costs no
// allocation here. msgs is the body's messages array when it was found already
// (msgs.known).
//
// With record rules the key covers the messages they read too (recordsKey),
// and is not memoised: their digest would be another walk of the body.
func (s *store) key(body []byte, msgs foundMessages) (string, []string) {
	if s.extractor.HasRecords() {
		texts := reqcontext.UserTexts(body)
		return recordsKey(s.keyVersion, texts, roleTexts(body, s.extractor)), texts
	}
	d, ok := s.keys.digest(body, msgs)
	if ok {
		if k, hit := s.keys.lru.Get(d); hit {
			return k, nil
		}
	}
	var k string
	texts := reqcontext.UserTexts(body)
	if hasText(texts) {
		k = SourceKey(s.keyVersion, texts...)
	}
	if ok {
		s.keys.lru.Put(d, k, 0)
	}
	return k, texts
}

// lazyTexts returns a function that returns the request's texts: texts when
// they were decoded already (not nil), else the user texts of body, decoded on
// first use, and the messages the record rules read.
func (s *store) lazyTexts(body []byte, texts []string) func() requestTexts {
	return func() requestTexts {
		if texts == nil {
			texts = reqcontext.UserTexts(body)
		}
		t := requestTexts{user: texts}
		if s.extractor.HasRecords() {
			t.messages = roleTexts(body, s.extractor)
		}
		return t
	}
}

// inMemory returns key's index when the memory tier holds it: index's first
// step, which a request whose index is in memory needs alone, without the
// function that would decode its texts.
func (s *store) inMemory(key string) (resolved, bool) {
	if e, ok := s.memory.Get(key); ok {
		return resolved{ix: e.ix, source: SourceMemory}, true
	}
	return resolved{}, false
}

// index returns the index under key: from memory, else from the shared cache, else
// built from texts (called only then). Callers that share another request's flight get
// SourceMemory: the index came from this process without a shared read or a build
// of their own. A built index is written back to the shared cache: in the
// background, or — for a session's segment (inSession), which no later request can
// rebuild — before returning and durably (kept through a shared-tier outage).
func (s *store) index(ctx context.Context, key string, texts func() requestTexts, inSession bool) (resolved, error) {
	if r, ok := s.inMemory(key); ok {
		return r, nil
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
		release, err := s.acquireHeavy(ctx)
		if err != nil {
			return resolved{}, err
		}
		start := time.Now()
		t := texts()
		ix, err = s.extractor.ExtractRequest(t.user, t.messages)
		r.build = time.Since(start)
		release()
		if err != nil {
			return resolved{}, err
		}
		if s.observeBuild != nil {
			s.observeBuild(r.build)
		}
		r.ix = ix
		published := s.remember(key, ix)
		if inSession {
			s.publish(ctx, key, ix)
			published.Store(true)
		} else {
			s.writeBack(key, ix)
		}
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

// acquireHeavy waits for a turn to build or decode an index (see store.heavy),
// or for ctx to end.
func (s *store) acquireHeavy(ctx context.Context) (func(), error) {
	select {
	case s.heavy <- struct{}{}:
		return func() { <-s.heavy }, nil
	case <-ctx.Done():
		return nil, context.Cause(ctx)
	}
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
	release, err := s.acquireHeavy(ctx)
	if err != nil {
		return nil, err
	}
	ix, err := UnmarshalIndex(blob)
	release()
	if err != nil {
		return nil, fmt.Errorf("facts: shared cache entry %s%s (%d bytes) does not decode: %w", SharedKeyPrefix, key, len(blob), err)
	}
	// A decoded index keeps one copy of the blob; its strings are pieces of it.
	s.remember(key, ix).Store(true)
	return ix, nil
}

// publish writes ix to the shared cache now, durably: a shared tier that is down
// keeps it and writes it when it is back.
func (s *store) publish(ctx context.Context, key string, ix *Index) {
	blob := s.encode(ix)
	if err := cache.SetDurable(ctx, s.shared, SharedKeyPrefix+key, blob, s.ttl); err != nil && s.log != nil {
		s.log.Warn("facts: writing a session segment's fact index to the shared cache", "key", SharedKeyPrefix+key, "bytes", len(blob), "error", err)
	}
}

// ensurePublished publishes key's index unless the memory tier knows it is
// published already; a session is about to name it.
func (s *store) ensurePublished(ctx context.Context, key string, ix *Index) {
	if e, ok := s.memory.Get(key); ok && e.published != nil {
		if e.published.Load() {
			return
		}
		s.publish(ctx, key, ix)
		e.published.Store(true)
		return
	}
	s.publish(ctx, key, ix) // not kept in memory (larger than the tier): publish each time
}

// writeBack encodes ix and stores it in the shared cache in the background: the
// waiting request has its index already, and a lost write is only a later rebuild.
func (s *store) writeBack(key string, ix *Index) {
	s.writes.Add(1)
	go func() {
		defer s.writes.Done()
		blob := s.encode(ix)
		if err := s.shared.Set(context.Background(), SharedKeyPrefix+key, blob, s.ttl); err != nil && s.log != nil {
			s.log.Warn("facts: writing the fact index to the shared cache", "key", SharedKeyPrefix+key, "bytes", len(blob), "error", err)
		}
	}()
}

// encode returns ix's encoding for the shared cache and records its size.
func (s *store) encode(ix *Index) []byte {
	blob, _ := ix.MarshalBinary()
	if s.observeEncoded != nil {
		s.observeEncoded(len(blob))
	}
	return blob
}

// remember keeps ix in the memory tier, charged its heap size. It returns the
// entry's published flag.
func (s *store) remember(key string, ix *Index) *atomic.Bool {
	published := new(atomic.Bool)
	s.memory.Put(key, memoryEntry{ix: ix, published: published, size: memoryEntryOverhead + int64(len(key)) + indexHeapBytes(ix)}, 0)
	return published
}

// Heap cost of an index besides its text, its records, its UnitIds and positions:
// per operation, its entries in the derived lookup tables (per kind, per player,
// per asset or power); per UnitId mention, its unitOps entry; per unit, its
// unitIDs and unitStart entries; per name, its string header, nameID map entry and
// table headers, and per firstProd entry its map slot; and the headers' fixed part.
//
// unsafe: Sizeof only, compile-time sizes; no pointer is made (docs/architecture.md, Lifetimes).
const (
	opRecBytes       = int64(unsafe.Sizeof(opRec{}))
	opTableBytes     = 3 * 4 // byKind, playerOps, byAsset/byPower
	unitMentionBytes = 4
	unitSlotBytes    = 12
	nameBytes        = 128
	firstProdBytes   = 24
	posBytes         = int64(unsafe.Sizeof([3]float64{}))
	indexBaseBytes   = 4 << 10
	// memoryEntryOverhead is the LRU's own cost per entry: its list node, map slot
	// and the entry's header.
	memoryEntryOverhead = 160
)

// indexHeapBytes estimates the heap an index holds: its text (the extracted lines,
// the log it refers to, or the whole decoded blob its strings point into), its
// records, UnitIds and positions, and the derived tables. It is what the memory
// tier's byte bound is charged.
func indexHeapBytes(ix *Index) int64 {
	return indexBaseBytes + allocBytes(int64(len(ix.text))) +
		allocBytes(int64(cap(ix.recs))*opRecBytes) + int64(len(ix.recs))*opTableBytes +
		allocBytes(int64(cap(ix.units))*8) + int64(len(ix.units))*unitMentionBytes +
		allocBytes(int64(cap(ix.pos))*posBytes) +
		int64(len(ix.unitIDs))*unitSlotBytes + int64(len(ix.names))*nameBytes +
		int64(len(ix.firstProd))*firstProdBytes + recordsHeapBytes(ix)
}

// allocBytes is what the heap takes for an allocation of n bytes: small ones are
// rounded up to a size class (at most 1/8 more), large ones to whole 8 KiB pages.
func allocBytes(n int64) int64 {
	if n > 32<<10 {
		return (n + 8<<10 - 1) &^ (8<<10 - 1)
	}
	return n + n/8
}

// keyMemoEntries bounds the fact keys remembered per route. An entry costs about
// 200 bytes of heap (the LRU node, the map slot, the key string), so the memo
// holds at most ~3 MiB — outside facts.memory_bytes, within the process's fixed
// share. A repeated log beyond it only costs its SHA-256 key again.
const keyMemoEntries = 1 << 14

// keyMemo remembers the fact keys of recently seen request bodies by a 128-bit
// digest of their user messages' raw JSON contents: XXH3-128 with a random seed
// new in every process, plus the total length. XXH3 reads the 862 KB log in
// ~15 µs, against ~100 µs for hash/maphash (two of which the memo used before, for
// 128 bits) and ~750 µs for SHA-256, so a repeated log costs a small fraction of
// computing its key. By chance, two contents collide with probability about
// 2^-128 per pair; XXH3 is not a keyed MAC, but the seed is secret and never
// shown, so crafting a body whose digest equals another client's would mean
// finding a second preimage of a text one does not see under a key one does not
// know. Equal raw contents decode to equal texts, so a hit is always the right
// key; texts written with other JSON escapes merely miss. The memo only shortcuts
// the key: the key itself (what the shared cache and sessions use) is always the
// SHA-256 SourceKey of the texts.
type keyMemo struct {
	seed uint64
	lru  *cache.LRU[textDigest, string]
}

type textDigest struct {
	h xxh3.Uint128
	n int
}

func newKeyMemo(entries int) *keyMemo {
	var seed [8]byte
	_, _ = rand.Read(seed[:]) // crypto/rand.Read does not fail
	return &keyMemo{
		seed: binary.LittleEndian.Uint64(seed[:]),
		lru:  cache.NewLRU(cache.LRUOptions[textDigest, string]{MaxEntries: entries}),
	}
}

// foundMessages is a body's messages array found before the facts job (by the
// context stage: reqcontext.ScannedMessages), when known: list and found as
// reqcontext.FindMessages returns them.
type foundMessages struct {
	list         reqcontext.MessageList
	found, known bool
}

// digest hashes the raw contents of body's user messages as a sequence: one
// content is hashed whole; several are hashed each, and the (length, hash) pairs
// are hashed again, so that the split between messages counts. It reports false
// when body has no messages array (nothing worth remembering). It reads the body
// twice — once to find the contents, unless they are known already, once to
// hash them — and allocates only for a body with several user messages.
func (m *keyMemo) digest(body []byte, found foundMessages) (textDigest, bool) {
	var msgs reqcontext.MessageList
	var ok bool
	if found.known {
		msgs, ok = found.list, found.found
	} else {
		msgs, ok = reqcontext.FindMessages(body)
	}
	if !ok {
		return textDigest{}, false
	}
	var d textDigest
	var one []byte
	users := 0
	for _, msg := range msgs.Items {
		if msg.Role == "user" {
			one = msg.Content(body)
			d.n += len(one)
			users++
		}
	}
	if users <= 1 {
		d.h = xxh3.Hash128Seed(one, m.seed)
		return d, true
	}
	buf := make([]byte, 0, 24*users)
	for _, msg := range msgs.Items {
		if msg.Role == "user" {
			c := msg.Content(body)
			h := xxh3.Hash128Seed(c, m.seed)
			buf = binary.LittleEndian.AppendUint64(buf, uint64(len(c)))
			buf = binary.LittleEndian.AppendUint64(buf, h.Hi)
			buf = binary.LittleEndian.AppendUint64(buf, h.Lo)
		}
	}
	d.h = xxh3.Hash128Seed(buf, m.seed)
	return d, true
}
