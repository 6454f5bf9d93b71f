package facts

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"testing"
	"time"

	"github.com/factgate/factgate/cache"
	"github.com/factgate/factgate/interceptors/reqcontext"
)

// The request-phase benchmarks run on allied_vs_soviet.large.txt (17,797 lines,
// 862 KB). A request's cost splits into reading the user texts out of the body,
// the fact key, and the tier lookup; FromExchange itself only waits.

// BenchmarkRequestMemoryHit is one request whose index is in memory, end to end:
// OnRequest (texts, key from the memo, lookup, in a goroutine) and FromExchange.
func BenchmarkRequestMemoryHit(b *testing.B) {
	benchmarkRequestMemoryHit(b, replay(b, "allied_vs_soviet.large.txt"))
}

// BenchmarkRequestMemoryHitSmall is BenchmarkRequestMemoryHit with a 19-line log:
// beside it, it shows what grows with the log (time: two reads of the body) and
// what does not (allocations).
func BenchmarkRequestMemoryHitSmall(b *testing.B) {
	benchmarkRequestMemoryHit(b, replay(b, "mcv_vs_miner.txt"))
}

func benchmarkRequestMemoryHit(b *testing.B, log string) {
	s := newStage(b, nil, Config{})
	body := chatBody(b, log)
	ctx := context.Background()
	if _, info, _ := requestOn(ctx, s, body); info.Source != SourceBuilt {
		b.Fatalf("warm-up source %q", info.Source)
	}
	b.ReportAllocs()
	start := cpuTime()
	for b.Loop() {
		if _, info, _ := requestOn(ctx, s, body); info.Source != SourceMemory {
			b.Fatalf("source %q, want memory", info.Source)
		}
	}
	reportCPU(b, start)
}

// requestOn runs the stage's request phase on body and waits for the index.
func requestOn(ctx context.Context, s *testStage, body []byte) (*Index, Info, error) {
	ex := newExchange(body, "")
	_ = s.OnRequest(ctx, ex)
	return FromExchange(ex)
}

// BenchmarkUserTextsLarge is the first step of every request: the user texts out
// of the JSON body (reqcontext.UserTexts, unescaping the log).
func BenchmarkUserTextsLarge(b *testing.B) {
	body := chatBody(b, replay(b, "allied_vs_soviet.large.txt"))
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		if len(reqcontext.UserTexts(body)) != 1 {
			b.Fatal("no text")
		}
	}
}

// BenchmarkFactKeyRepeated is the fact key of a request body whose log was seen
// before: locating the user contents and the XXH3 memo, instead of decoding
// them (BenchmarkUserTextsLarge) and SHA-256 (BenchmarkSourceKeyLarge).
func BenchmarkFactKeyRepeated(b *testing.B) {
	s := newStage(b, nil, Config{})
	body := chatBody(b, replay(b, "allied_vs_soviet.large.txt"))
	want, _ := s.store.keyOf(body)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		if k, _ := s.store.keyOf(body); k != want {
			b.Fatal("key changed")
		}
	}
}

// BenchmarkLookupMemoryHit is the tier lookup alone, for a key in memory.
func BenchmarkLookupMemoryHit(b *testing.B) {
	s := newStage(b, nil, Config{})
	key, texts := s.store.keyOf(chatBody(b, replay(b, "allied_vs_soviet.large.txt")))
	ctx := context.Background()
	if _, err := s.store.index(ctx, key, texts, false); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if r, _ := s.store.index(ctx, key, texts, false); r.source != SourceMemory {
			b.Fatalf("source %q", r.source)
		}
	}
}

// BenchmarkFromExchangeResolved is FromExchange once the index is resolved (every
// call after the first: the revision's attempts).
func BenchmarkFromExchangeResolved(b *testing.B) {
	s := newStage(b, nil, Config{})
	ex := newExchange(chatBody(b, replay(b, "allied_vs_soviet.large.txt")), "")
	_ = s.OnRequest(context.Background(), ex)
	FromExchange(ex)
	b.ReportAllocs()
	for b.Loop() {
		if ix, _, _ := FromExchange(ex); !ix.HasFacts() {
			b.Fatal("no facts")
		}
	}
}

// BenchmarkLookupSharedHit is a memory miss served by the shared tier: the read
// and the decode (1.3 MB encoded). "memory-cache" is the decode alone; "redis" is
// a real Redis round trip (FACTGATE_TEST_REDIS_URL).
func BenchmarkLookupSharedHit(b *testing.B) {
	body := chatBody(b, replay(b, "allied_vs_soviet.large.txt"))
	run := func(b *testing.B, shared cache.Cache) {
		s := newStage(b, shared, Config{})
		key, texts := s.store.keyOf(body)
		blob, _ := extract(b, texts().user...).MarshalBinary()
		if err := shared.Set(context.Background(), SharedKeyPrefix+key, blob, time.Minute); err != nil {
			b.Fatal(err)
		}
		b.SetBytes(int64(len(blob)))
		b.ReportAllocs()
		start := cpuTime()
		for b.Loop() {
			s.store.memory.Purge()
			if r, _ := s.store.index(context.Background(), key, texts, false); r.source != SourceShared {
				b.Fatalf("source %q, want shared", r.source)
			}
		}
		reportCPU(b, start)
	}
	b.Run("memory-cache", func(b *testing.B) { run(b, newMemoryCache()) })
	b.Run("redis", func(b *testing.B) {
		url := os.Getenv("FACTGATE_TEST_REDIS_URL")
		if url == "" {
			b.Skip("FACTGATE_TEST_REDIS_URL is not set")
		}
		var nonce [6]byte
		_, _ = rand.Read(nonce[:])
		r, err := cache.NewRedis(cache.RedisConfig{URL: url, KeyPrefix: "factgate:bench:" + hex.EncodeToString(nonce[:]) + ":"}, nil)
		if err != nil {
			b.Fatal(err)
		}
		defer r.Close()
		run(b, r)
		key, _ := newStage(b, nil, Config{}).store.keyOf(body)
		_ = r.Delete(context.Background(), SharedKeyPrefix+key)
	})
}

// missCache is a shared cache that never holds anything: every lookup builds.
// Only the calls the facts stage makes are implemented.
type missCache struct{ cache.Cache }

func (missCache) Get(context.Context, string) ([]byte, bool, error)           { return nil, false, nil }
func (missCache) Set(context.Context, string, []byte, time.Duration) error    { return nil }
func (missCache) SetAdd(context.Context, string, string, time.Duration) error { return nil }
func (missCache) SetMembers(context.Context, string) ([]string, error)        { return nil, nil }

// BenchmarkLookupBuild is a miss in every tier: the extraction, the memory put and
// the (here empty) write-back; the encoding for the shared cache runs in the
// background and is in BenchmarkMarshalLarge.
func BenchmarkLookupBuild(b *testing.B) {
	s := newStage(b, missCache{}, Config{})
	key, texts := s.store.keyOf(chatBody(b, replay(b, "allied_vs_soviet.large.txt")))
	b.SetBytes(int64(len(texts().user[0])))
	b.ReportAllocs()
	start := cpuTime()
	for b.Loop() {
		s.store.memory.Purge()
		if r, _ := s.store.index(context.Background(), key, texts, false); r.source != SourceBuilt {
			b.Fatalf("source %q", r.source)
		}
		s.settle()
	}
	reportCPU(b, start)
}

// BenchmarkSessionMergedHit is the third segment of a session whose merge is in
// memory: the set write and read (in-process cache) and the merged lookup.
func BenchmarkSessionMergedHit(b *testing.B) {
	s := newStage(b, nil, Config{})
	ctx := context.Background()
	bodies := [][]byte{
		chatBody(b, replay(b, "allied_vs_soviet.part1.txt")),
		chatBody(b, replay(b, "allied_vs_soviet.part2.txt")),
		chatBody(b, replay(b, "allied_vs_soviet.part3.txt")),
	}
	request := func(body []byte) Info {
		ex := newExchange(body, "bench-session")
		_ = s.OnRequest(ctx, ex)
		_, info, _ := FromExchange(ex)
		return info
	}
	for _, body := range bodies {
		request(body)
	}
	b.ReportAllocs()
	for b.Loop() {
		if info := request(bodies[2]); info.Segments != 3 {
			b.Fatalf("%d segments", info.Segments)
		}
	}
}
