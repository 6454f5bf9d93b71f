package facts

import (
	"context"
	"errors"
	"log/slog"
	"runtime"
	"testing"
	"time"

	"github.com/factgate/factgate/cache"
)

// TestIndexBuildsWaitForACPU: no more index builds run at once than the process
// has CPUs — a build beyond them waits, holding no decoded text, until one ends.
// A request that gives up meanwhile stops waiting; the build goes on for the next
// request of the same log (it is a single flight).
func TestIndexBuildsWaitForACPU(t *testing.T) {
	t.Parallel()
	s := newStore(ra3(t), "v", cache.NewMemory(cache.MemoryConfig{}), settings{memoryBytes: 1 << 20, ttl: time.Hour}, nil, slog.New(slog.DiscardHandler))
	if got, want := cap(s.heavy), runtime.GOMAXPROCS(0); got != want {
		t.Fatalf("%d builds at once, want GOMAXPROCS %d", got, want)
	}
	for range cap(s.heavy) { // every CPU busy with another build
		s.heavy <- struct{}{}
	}
	decoded := false
	texts := func() requestTexts {
		decoded = true
		return requestTexts{user: []string{replay(t, "allied_vs_soviet.txt")}}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, err := s.index(ctx, "k1", texts, false); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a build with every CPU busy: err %v, want it to wait until the request's deadline", err)
	}
	if decoded {
		t.Error("a waiting build decoded its texts before its turn")
	}
	<-s.heavy // one build ends
	r, err := s.index(context.Background(), "k1", texts, false)
	if err != nil || r.ix == nil || !decoded {
		t.Fatalf("with a CPU free: %+v, %v (texts decoded: %v)", r, err, decoded)
	}
	if len(s.heavy) != cap(s.heavy)-1 {
		t.Errorf("the build did not give its turn back: %d of %d taken", len(s.heavy), cap(s.heavy))
	}
	s.writes.Wait()
}
