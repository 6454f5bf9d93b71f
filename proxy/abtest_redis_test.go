package proxy

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"sort"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// abRedis returns the shared test Redis (FACTGATE_TEST_REDIS_URL) and a key prefix
// of this test alone, whose keys are deleted at cleanup.
func abRedis(t *testing.T) (url, prefix string, client *redis.Client) {
	t.Helper()
	url = os.Getenv("FACTGATE_TEST_REDIS_URL")
	if url == "" {
		t.Skipf("FACTGATE_TEST_REDIS_URL is not set (e.g. redis://127.0.0.1:6379/0): %s, which needs a shared Redis, did not run", t.Name())
	}
	opts, err := redis.ParseURL(url)
	if err != nil {
		t.Fatalf("FACTGATE_TEST_REDIS_URL: %v", err)
	}
	client = redis.NewClient(opts)
	var nonce [6]byte
	_, _ = rand.Read(nonce[:])
	prefix = "factgate:test:abtest:" + hex.EncodeToString(nonce[:]) + ":"
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		iter := client.Scan(ctx, 0, prefix+"*", 100).Iterator()
		for iter.Next(ctx) {
			client.Del(ctx, iter.Val())
		}
		client.Close()
	})
	return url, prefix, client
}

// TestExperimentCountersAggregateAcrossReplicas: two proxies sharing Redis each
// serve part of the traffic; either one's report counts all of it.
func TestExperimentCountersAggregateAcrossReplicas(t *testing.T) {
	t.Parallel()
	url, prefix, client := abRedis(t)
	block := fmt.Sprintf("cache:\n  redis:\n    url: %q\n    key_prefix: %q\n", url, prefix)
	a := newABHarness(t, true, block)
	b := newABHarness(t, true, block)

	users := make([]string, 30)
	for i := range users {
		users[i] = fmt.Sprintf("replica-user-%02d", i)
	}
	sentA := abSend(t, a.base, users[:12])
	sentB := abSend(t, b.base, users[12:])
	want := map[string]int64{}
	for v, n := range sentA {
		want[v] += int64(n)
	}
	for v, n := range sentB {
		want[v] += int64(n)
	}

	for name, h := range map[string]*harness{"A": a, "B": b} {
		er := abReport(t, h.base, 30)
		for _, v := range er.Variants {
			if v.Requests != want[v.Name] {
				t.Errorf("replica %s reports %d requests for %s, want %d (A served %v, B %v)", name, v.Requests, v.Name, want[v.Name], sentA, sentB)
			}
			if v.Name == "baseline" && v.Rates.FirstDraftContradiction.Count != want["baseline"] {
				t.Errorf("replica %s: baseline's contradicted first drafts %s, want %d", name, v.Rates.FirstDraftContradiction, want["baseline"])
			}
		}
	}

	// One hash per variant, every key of the experiment under one hash tag.
	keys, err := client.Keys(context.Background(), prefix+"*experiment:*").Result()
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(keys)
	wantKeys := []string{}
	for _, v := range []string{"baseline", "strict"} {
		if want[v] > 0 {
			wantKeys = append(wantKeys, prefix+"experiment:{ra3/strict-rules}:"+v)
		}
	}
	if fmt.Sprint(keys) != fmt.Sprint(wantKeys) {
		t.Fatalf("counter keys %v, want %v", keys, wantKeys)
	}
	if ttl := client.TTL(context.Background(), wantKeys[0]).Val(); ttl < 29*24*time.Hour {
		t.Errorf("counters expire in %s, want the default 30 days", ttl)
	}
}
