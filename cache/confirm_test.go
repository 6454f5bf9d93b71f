package cache

import (
	"context"
	"maps"
	"testing"
	"time"
)

// TestGetConfirmedAsksRedisOverMemory: a value another replica deleted is gone
// for GetConfirmed at once, though memory still holds it (Get serves it until
// local_ttl ends); this replica's own pending delete wins over what Redis still
// holds; while Redis fails the answer is memory's, unconfirmed.
func TestGetConfirmedAsksRedisOverMemory(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	remote := newFakeRedis()
	a := newTieredFixture(t, remote, TieredConfig{ProbeInterval: noProbe})
	b := newTieredFixture(t, remote, TieredConfig{ProbeInterval: noProbe})

	_ = a.cache.Set(ctx, "console:session:x", []byte("s"), time.Hour)
	if v, ok, confirmed, err := GetConfirmed(ctx, b.cache, "console:session:x"); err != nil || !ok || !confirmed || string(v) != "s" {
		t.Fatalf("B reads the value: %q %v %v %v", v, ok, confirmed, err)
	}
	_ = a.cache.Delete(ctx, "console:session:x")
	if _, ok, _ := b.cache.Get(ctx, "console:session:x"); !ok {
		t.Fatal("Get no longer serves B's memory copy: the test shows nothing")
	}
	if _, ok, confirmed, _ := GetConfirmed(ctx, b.cache, "console:session:x"); ok || !confirmed {
		t.Fatalf("GetConfirmed on B after A deleted: ok %v confirmed %v, want absent, confirmed", ok, confirmed)
	}
	if _, ok, _ := b.cache.Get(ctx, "console:session:x"); ok {
		t.Error("B's memory still holds the value Redis no longer has")
	}

	// A's delete while Redis fails is pending; once Redis answers, and before
	// the replay, A still answers absent.
	_ = a.cache.Set(ctx, "console:session:y", []byte("s"), time.Hour)
	remote.down.Store(true)
	_ = a.cache.Delete(ctx, "console:session:y")
	if _, ok, _, _ := GetConfirmed(ctx, a.cache, "console:session:y"); ok {
		t.Fatal("A serves a value it deleted")
	}
	_ = b.cache.Set(ctx, "console:session:z", []byte("z"), time.Hour) // B's memory only
	if v, ok, confirmed, _ := GetConfirmed(ctx, b.cache, "console:session:z"); !ok || confirmed || string(v) != "z" {
		t.Fatalf("B while Redis fails: %q %v %v, want its memory's value, unconfirmed", v, ok, confirmed)
	}
	remote.down.Store(false)
	a.clock.advance(time.Hour) // past the error backoff
	if _, ok, confirmed, _ := GetConfirmed(ctx, a.cache, "console:session:y"); ok || !confirmed {
		t.Fatalf("A before its delete is replayed: ok %v confirmed %v, want absent", ok, confirmed)
	}
}

// TestFlushReplaysThePendingWritesOrCountsThem: Flush writes what is pending as
// soon as Redis answers, without waiting for the probe; while Redis stays down
// it keeps trying until its context ends, then says what is left by namespace.
func TestFlushReplaysThePendingWritesOrCountsThem(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	remote := newFakeRedis()
	f := newTieredFixture(t, remote, TieredConfig{ProbeInterval: noProbe})
	remote.down.Store(true)
	for range 20 {
		_ = f.cache.HashIncr(ctx, "experiment:{r/e}:a", map[string]int64{"requests": 1}, time.Hour)
	}
	_ = f.cache.SetDurable(ctx, "trace:{t1}", []byte("trace"), time.Hour)
	_ = f.cache.SetDurable(ctx, "facts:k", []byte("index"), time.Hour)
	_ = f.cache.Delete(ctx, "console:session:s")

	short, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	left := f.cache.Flush(short)
	cancel()
	want := map[string]int{"experiment": 1, "trace": 1, "facts": 1, "console": 1}
	if !maps.Equal(left, want) {
		t.Fatalf("Flush with Redis down left %v, want %v", left, want)
	}

	remote.down.Store(false) // Redis is back; no probe has noticed yet
	if left := f.cache.Flush(ctx); left != nil {
		t.Fatalf("Flush with Redis back left %v", left)
	}
	counters, _ := remote.store.HashGetAll(ctx, "experiment:{r/e}:a")
	if counters["requests"] != 20 {
		t.Errorf("Redis counts %d requests, want the 20 made while it was down", counters["requests"])
	}
	if v, ok, _ := remote.store.Get(ctx, "trace:{t1}"); !ok || string(v) != "trace" {
		t.Errorf("the trace did not reach Redis: %q %v", v, ok)
	}
}
