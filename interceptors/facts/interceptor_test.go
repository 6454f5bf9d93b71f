package facts

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/factgate/factgate/configs/units"
	"github.com/factgate/factgate/interceptors"
	"github.com/factgate/factgate/knowledge"
)

func TestConfigValidate(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		cfg  Config
		want string // substring of the error; "" = valid
	}{
		{name: "zero is the default", cfg: Config{}},
		{name: "every field set", cfg: Config{MemoryBytes: 1 << 20, TTL: units.Duration(time.Hour), SessionTTL: units.Duration(time.Minute), MaxBytes: 1 << 20, MaxSessionSegments: 4}},
		{name: "negative memory", cfg: Config{MemoryBytes: -1}, want: "memory_bytes: -1 is negative"},
		{name: "negative ttl", cfg: Config{TTL: -1}, want: "ttl:"},
		{name: "negative session ttl", cfg: Config{SessionTTL: -1}, want: "session_ttl:"},
		{name: "max_bytes over the limit", cfg: Config{MaxBytes: 2 << 30}, want: "max_bytes: 2GiB is more than the limit 1GiB"},
		{name: "negative segments", cfg: Config{MaxSessionSegments: -2}, want: "max_session_segments: -2"},
		{name: "short ttl shortens the default session ttl", cfg: Config{TTL: units.Duration(time.Hour)}},
		{name: "session outliving its indexes", cfg: Config{TTL: units.Duration(time.Hour), SessionTTL: units.Duration(2 * time.Hour)}, want: "session_ttl: 2h0m0s is longer than ttl 1h0m0s"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := tt.cfg.Validate()
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("Validate() = %v, want nil", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Fatalf("Validate() = %v, want an error containing %q", err, tt.want)
			}
		})
	}
}

func TestConfigDefaults(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		cfg  Config
		want settings
	}{
		{name: "zero", cfg: Config{}, want: settings{memoryBytes: 32 << 20, ttl: 24 * time.Hour, sessionTTL: 24 * time.Hour, maxBytes: DefaultMaxBytes, maxSegments: 32}},
		{name: "short ttl", cfg: Config{TTL: units.Duration(time.Hour)}, want: settings{memoryBytes: 32 << 20, ttl: time.Hour, sessionTTL: time.Hour, maxBytes: DefaultMaxBytes, maxSegments: 32}},
		{name: "all set", cfg: Config{MemoryBytes: 1 << 20, TTL: units.Duration(2 * time.Hour), SessionTTL: units.Duration(time.Hour), MaxBytes: 1 << 10, MaxSessionSegments: 3}, want: settings{memoryBytes: 1 << 20, ttl: 2 * time.Hour, sessionTTL: time.Hour, maxBytes: 1 << 10, maxSegments: 3}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := tt.cfg.settings(); got != tt.want {
				t.Fatalf("settings() = %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestNewNamesWhatIsMissing(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		cfg  Config
		pack *knowledge.Pack
		want string
	}{
		{name: "no pack", pack: nil, want: "names no pack"},
		{name: "pack without fact rules", pack: &knowledge.Pack{Name: "dnd"}, want: `pack "dnd" has no fact rules`},
		{name: "rules that do not compile", pack: &knowledge.Pack{Name: "bad", Facts: &knowledge.FactRules{Ops: []knowledge.OpRule{{Op: "build", Regex: "("}}}}, want: `pack "bad": facts: ops[0] (op "build")`},
		{name: "bad config", cfg: Config{MaxBytes: -5}, pack: &knowledge.Pack{Name: "ra3", Facts: loadRules(t)}, want: "max_bytes: -5 is negative"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := New(tt.cfg, interceptors.Deps{Route: "r", Pack: tt.pack})
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("New() = %v, want an error containing %q", err, tt.want)
			}
		})
	}
}

// TestIndexTiers follows one log through the tiers: built on the first request,
// from memory on the next, from the shared cache on another replica.
func TestIndexTiers(t *testing.T) {
	t.Parallel()
	shared := newMemoryCache()
	text := replay(t, "allied_vs_soviet.txt")
	wantKey := SourceKey(ra3(t).Version(), text)
	wantOps := extract(t, text).Len()

	a := newStage(t, shared, Config{})
	first := a.request(t, "", text)
	second := a.request(t, "", text)
	a.settle()
	b := newStage(t, shared, Config{}) // another replica, same shared cache
	third := b.request(t, "", text)
	fourth := b.request(t, "", text)

	for _, step := range []struct {
		name   string
		got    result
		source string
	}{
		{"first request on A", first, SourceBuilt},
		{"second request on A", second, SourceMemory},
		{"first request on B", third, SourceShared},
		{"second request on B", fourth, SourceMemory},
	} {
		if step.got.err != nil {
			t.Errorf("%s: error %v", step.name, step.got.err)
		}
		if step.got.info.Source != step.source {
			t.Errorf("%s: source %q, want %q", step.name, step.got.info.Source, step.source)
		}
		if step.got.info.Key != wantKey || step.got.trace.FactKey != wantKey {
			t.Errorf("%s: key %q, trace key %q, want %q", step.name, step.got.info.Key, step.got.trace.FactKey, wantKey)
		}
		if step.got.ix.Len() != wantOps {
			t.Errorf("%s: %d operations, want %d", step.name, step.got.ix.Len(), wantOps)
		}
		if step.got.trace.Timings["facts"] <= 0 {
			t.Errorf("%s: no facts timing in the trace: %v", step.name, step.got.trace.Timings)
		}
	}
	if first.info.BuildTime <= 0 || second.info.BuildTime != 0 {
		t.Errorf("build times %v, %v: want only the built one timed", first.info.BuildTime, second.info.BuildTime)
	}
	if got := a.sources(t); got[SourceBuilt] != 1 || got[SourceMemory] != 1 || got[SourceShared] != 0 {
		t.Errorf("replica A counted %v", got)
	}
	if got := b.sources(t); got[SourceShared] != 1 || got[SourceMemory] != 1 || got[SourceBuilt] != 0 {
		t.Errorf("replica B counted %v", got)
	}
	if a.builds(t) != 1 || b.builds(t) != 0 {
		t.Errorf("builds: A %d, B %d; want 1, 0", a.builds(t), b.builds(t))
	}
	if blob, ok, _ := shared.Get(context.Background(), SharedKeyPrefix+wantKey); !ok {
		t.Error("the built index was not written to the shared cache")
	} else if _, err := UnmarshalIndex(blob); err != nil {
		t.Errorf("the shared entry does not decode: %v", err)
	}
}

// TestConcurrentRequestsBuildOnce: requests arriving together for one log build
// its index once. The shared read of the first is held until every request has
// missed the memory tier, so without single flight each would build.
func TestConcurrentRequestsBuildOnce(t *testing.T) {
	t.Parallel()
	const n = 12
	text := replay(t, "allied_vs_soviet.txt")
	release := make(chan struct{})
	hooked := &hookedCache{Cache: newMemoryCache()}
	s := newStage(t, hooked, Config{})
	hooked.beforeGet = func(key string) {
		if strings.HasPrefix(key, SharedKeyPrefix) {
			<-release
		}
	}
	var wg sync.WaitGroup
	results := make([]result, n)
	for i := range n {
		wg.Go(func() { results[i] = s.request(t, "", text) })
	}
	// Each request misses memory once before its flight; the leader once more.
	waitUntil(t, "every request to miss the memory tier", func() bool { return s.store.memory.Stats().Misses >= n+1 })
	close(release)
	wg.Wait()

	if got := s.builds(t); got != 1 {
		t.Fatalf("%d builds for %d concurrent requests of one log, want 1", got, n)
	}
	counts := s.sources(t)
	if counts[SourceBuilt] != 1 || counts[SourceMemory] != n-1 {
		t.Errorf("sources %v, want built 1 and memory %d", counts, n-1)
	}
	for i, r := range results {
		if r.ix != results[0].ix {
			t.Errorf("request %d got another index than request 0", i)
		}
	}
}

// TestBrokenSharedCacheFailsOpen: a shared cache whose every call fails (not even
// the Tiered fallback) still gives every request its index, sessions included.
func TestBrokenSharedCacheFailsOpen(t *testing.T) {
	t.Parallel()
	hooked := &hookedCache{Cache: newMemoryCache()}
	hooked.failing.Store(true)
	s := newStage(t, hooked, Config{})
	text := replay(t, "allied_vs_soviet.part3.txt")
	r := s.request(t, "broken-session", text)
	if r.err != nil || r.info.Source != SourceBuilt || r.ix.Len() != extract(t, text).Len() {
		t.Fatalf("with a broken shared cache: err %v, source %q, %d ops", r.err, r.info.Source, r.ix.Len())
	}
	if r.info.Segments != 1 {
		t.Errorf("session segments %d, want the request's own", r.info.Segments)
	}
	notes := strings.Join(r.trace.Notes, "\n")
	for _, want := range []string{"reading facts:", "adding segment", "reading session:{broken-session}:facts failed"} {
		if !strings.Contains(notes, want) {
			t.Errorf("trace notes lack %q:\n%s", want, notes)
		}
	}
}

func TestCorruptSharedEntryIsRebuilt(t *testing.T) {
	t.Parallel()
	shared := newMemoryCache()
	text := replay(t, "mcv_vs_miner.txt")
	key := SourceKey(ra3(t).Version(), text)
	_ = shared.Set(context.Background(), SharedKeyPrefix+key, []byte("FGFX\x01not an index at all"), 0)
	s := newStage(t, shared, Config{})
	r := s.request(t, "", text)
	if r.info.Source != SourceBuilt || !r.ix.HasFacts() {
		t.Fatalf("source %q with %d ops, want a rebuilt index", r.info.Source, r.ix.Len())
	}
	if notes := strings.Join(r.trace.Notes, "\n"); !strings.Contains(notes, "does not decode") {
		t.Errorf("the trace does not say the shared entry was corrupt:\n%s", notes)
	}
	s.settle()
	blob, _, _ := shared.Get(context.Background(), SharedKeyPrefix+key)
	if _, err := UnmarshalIndex(blob); err != nil {
		t.Errorf("the corrupt entry was not replaced: %v", err)
	}
}

// TestMemoryBound: an index larger than memory_bytes is not kept in memory, so the
// next request reads the shared tier instead.
func TestMemoryBound(t *testing.T) {
	t.Parallel()
	s := newStage(t, newMemoryCache(), Config{MemoryBytes: 16 << 10})
	text := replay(t, "allied_vs_soviet.txt") // ~24KB of text: over the bound
	first := s.request(t, "", text)
	s.settle()
	second := s.request(t, "", text)
	if first.info.Source != SourceBuilt || second.info.Source != SourceShared {
		t.Fatalf("sources %q then %q, want built then shared", first.info.Source, second.info.Source)
	}
	small := replay(t, "mcv_vs_miner.txt")
	s.request(t, "", small)
	if r := s.request(t, "", small); r.info.Source != SourceMemory {
		t.Errorf("a small index came from %q, want memory", r.info.Source)
	}
}

func TestTruncatedAtMaxBytes(t *testing.T) {
	t.Parallel()
	text := replay(t, "allied_vs_soviet.part1.txt")
	bounded := newStage(t, nil, Config{MaxBytes: 4 << 10})
	r := bounded.request(t, "", text)
	if !r.info.Truncated || !r.ix.Truncated() {
		t.Fatalf("a %d-byte log under max_bytes 4KiB: truncated %v", len(text), r.info.Truncated)
	}
	if r.ix.Len() == 0 || r.ix.Len() >= extract(t, text).Len() {
		t.Errorf("%d operations: want the ones before the bound", r.ix.Len())
	}
	if notes := strings.Join(r.trace.Notes, "\n"); !strings.Contains(notes, "exceeds the extraction bound (max_bytes 4KiB") {
		t.Errorf("the trace does not say the index is truncated:\n%s", notes)
	}
	full := newStage(t, nil, Config{}).request(t, "", text)
	if full.info.Truncated {
		t.Error("the default bound truncated a small log")
	}
	if full.info.Key == r.info.Key {
		t.Error("a bounded and an unbounded index share a key")
	}
}

// TestFactKey: the stage's key is SourceKey of the body's user texts, whether
// computed or remembered, and follows SourceKey's normalisation.
func TestFactKey(t *testing.T) {
	t.Parallel()
	s := newStage(t, nil, Config{})
	version := ra3(t).Version()
	log := replay(t, "mcv_vs_miner.txt")
	tests := []struct {
		name  string
		body  []byte
		texts []string // the user texts of body; nil = no key
	}{
		{"one text", chatBody(t, log), []string{log}},
		{"CRLF line endings", chatBody(t, strings.ReplaceAll(log, "\n", "\r\n")), []string{log}},
		{"split in two messages", chatBody(t, log[:len(log)/2], log[len(log)/2:]), []string{log[:len(log)/2], log[len(log)/2:]}},
		{"two texts, one empty", chatBody(t, log, ""), []string{log, ""}},
		{"prose only", chatBody(t, "What happened in this game?"), []string{"What happened in this game?"}},
		{"content parts", []byte(`{"messages":[{"role":"user","content":[{"type":"text","text":"0:02.10 A"},{"type":"image_url","image_url":{"url":"x"}}]}]}`), []string{"0:02.10 A"}},
		{"other JSON escapes, same text", []byte(`{"messages":[{"role":"user","content":"0:02.10 \u0041"}]}`), []string{"0:02.10 A"}},
		{"no user message", []byte(`{"messages":[{"role":"system","content":"x"}]}`), nil},
		{"no messages", []byte(`{"model":"m"}`), nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			want := ""
			if tt.texts != nil {
				want = SourceKey(version, tt.texts...)
			}
			for round := range 2 { // computed, then remembered
				got, texts := s.store.keyOf(tt.body)
				if got != want {
					t.Fatalf("round %d: key %q, want %q", round, got, want)
				}
				if tt.texts != nil && SourceKey(version, texts().user...) != want {
					t.Fatalf("round %d: the decoded texts %q do not key as the body", round, texts().user)
				}
			}
		})
	}
	a, _ := s.store.keyOf(chatBody(t, "0:01.00 a\nb"))
	b, _ := s.store.keyOf(chatBody(t, "0:01.00 a\nc"))
	if a == b {
		t.Error("different texts share a key")
	}
}

func TestRequestsWithoutFacts(t *testing.T) {
	t.Parallel()
	t.Run("no facts stage", func(t *testing.T) {
		t.Parallel()
		ix, info, err := FromExchange(newExchange(chatBody(t, "x"), ""))
		if !errors.Is(err, ErrNoFacts) || ix != nil || info != (Info{}) {
			t.Fatalf("FromExchange without a stage = %v, %+v, %v", ix, info, err)
		}
	})
	t.Run("no user text", func(t *testing.T) {
		t.Parallel()
		s := newStage(t, nil, Config{})
		r := s.request(t, "")
		if r.err != nil || r.ix.HasFacts() || r.info.Key != "" || r.trace.FactKey != "" {
			t.Fatalf("a request without user text: %+v, err %v", r.info, r.err)
		}
		if got := s.sources(t); got[SourceBuilt]+got[SourceMemory]+got[SourceShared] != 0 {
			t.Errorf("counted %v for a request without text", got)
		}
	})
	t.Run("prose without operations", func(t *testing.T) {
		t.Parallel()
		s := newStage(t, nil, Config{})
		r := s.request(t, "", "Who won, and why?")
		if r.err != nil || r.ix.HasFacts() || r.info.Source != SourceBuilt {
			t.Fatalf("prose: %+v, %d ops, err %v", r.info, r.ix.Len(), r.err)
		}
	})
}

// TestFromExchangeTwice: later phases (validation, then each revision) read the
// same index; only the first call waits.
func TestFromExchangeTwice(t *testing.T) {
	t.Parallel()
	s := newStage(t, nil, Config{})
	ex := newExchange(chatBody(t, replay(t, "mcv_vs_miner.txt")), "")
	if err := s.OnRequest(context.Background(), ex); err != nil {
		t.Fatal(err)
	}
	a, infoA, _ := FromExchange(ex)
	b, infoB, _ := FromExchange(ex)
	if a != b || infoA != infoB || !a.HasFacts() {
		t.Fatalf("two calls gave %p %+v and %p %+v", a, infoA, b, infoB)
	}
}

// waitUntil polls cond; tests use it where another goroutine makes progress.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for range 5000 {
		if cond() {
			return
		}
		sleepBriefly()
	}
	t.Fatalf("timed out waiting for %s", what)
}

// TestEncodedSizeIsReported checks that an index written to the shared cache
// shows its size in factgate_fact_index_encoded_bytes: one observation of the
// blob's length per write-back.
func TestEncodedSizeIsReported(t *testing.T) {
	t.Parallel()
	s := newStage(t, nil, Config{})
	text := replay(t, "allied_vs_soviet.txt")
	if _, info, _ := requestOn(context.Background(), s, chatBody(t, text)); info.Source != SourceBuilt {
		t.Fatalf("source %q, want built", info.Source)
	}
	s.settle()
	blob, _ := extract(t, text).MarshalBinary()
	families, err := s.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != "factgate_fact_index_encoded_bytes" {
			continue
		}
		h := f.GetMetric()[0].GetHistogram()
		if h.GetSampleCount() != 1 || h.GetSampleSum() != float64(len(blob)) {
			t.Errorf("observed %d sizes summing to %v, want one of %d", h.GetSampleCount(), h.GetSampleSum(), len(blob))
		}
		return
	}
	t.Error("factgate_fact_index_encoded_bytes not registered")
}
