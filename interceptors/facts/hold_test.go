package facts

import (
	"context"
	"strings"
	"testing"

	"github.com/factgate/factgate/interceptors"
)

// TestJobHoldsTheBody: the background job may read the client's body after the
// request is finished — a key the memo knows, whose index is neither in memory
// nor in the shared cache, is rebuilt from the body once the shared read
// returns. The body is in one of the exchange's pooled buffers, as in the proxy,
// and the proxy's Release comes while the job waits on the shared cache: the job
// must hold the buffer until it is done, or it reads a buffer the pool gave to
// another request (simulated here: the buffers taken after the release are
// overwritten; in -race builds Release also poisons what it returns).
func TestJobHoldsTheBody(t *testing.T) {
	t.Parallel()
	text := replay(t, "allied_vs_soviet.txt") // over the memory bound below
	wantKey := SourceKey(ra3(t).Version(), text)
	wantOps := extract(t, text).Len()
	hooked := &hookedCache{Cache: newMemoryCache()}
	hooked.failing.Store(true) // no shared tier: every request builds
	s := newStage(t, hooked, Config{MemoryBytes: 16 << 10})
	if r := s.request(t, "", text); r.err != nil || r.info.Key != wantKey {
		t.Fatalf("first request: key %q, error %v", r.info.Key, r.err)
	} // the memo knows the key now: the next request decodes the body only to build

	reading := make(chan struct{})
	resume := make(chan struct{})
	hooked.beforeGet = func(key string) {
		if strings.HasPrefix(key, SharedKeyPrefix) {
			close(reading)
			<-resume
		}
	}
	body := chatBody(t, text)
	ex := newExchange(nil, "")
	ex.Original = append(ex.Buffer(len(body)), body...)
	ex.Body = ex.Original
	if err := s.OnRequest(context.Background(), ex); err != nil {
		t.Fatal(err)
	}
	<-reading
	ex.Release() // the proxy is done with the request
	other := &interceptors.Exchange{}
	for range 4 {
		b := other.Buffer(len(body))
		b = b[:cap(b)]
		for i := range b {
			b[i] = '!'
		}
	}
	close(resume)
	ix, info, err := FromExchange(ex)
	other.Release()
	if err != nil || info.Source != SourceBuilt || info.Key != wantKey {
		t.Fatalf("source %q, key %q, error %v; want built, %q", info.Source, info.Key, err, wantKey)
	}
	if ix.Len() != wantOps {
		t.Errorf("the index built after the release has %d operations, want %d", ix.Len(), wantOps)
	}
}
