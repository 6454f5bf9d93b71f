package redistest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// The starters themselves: a cluster spreads keys over its masters and survives a
// master's death through its replica; a sentinel setup promotes the replica.

func TestClusterServesEverySlotAndFailsOver(t *testing.T) {
	c := StartCluster(t, 3, 1)
	ctx := context.Background()
	cl := redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.Addrs(), ClusterStateReloadInterval: time.Second})
	defer cl.Close()
	owners := map[string]bool{}
	for i := 0; i < 30; i++ {
		k := fmt.Sprintf("k%d", i)
		if err := cl.Set(ctx, k, "v", time.Minute).Err(); err != nil {
			t.Fatalf("SET %s: %v", k, err)
		}
		owners[c.MasterFor(t, k).Addr()] = true
	}
	if len(owners) != 3 {
		t.Fatalf("30 keys landed on %d masters, want all 3: %v", len(owners), owners)
	}
	victim := c.MasterFor(t, "k0")
	victim.Kill()
	deadline := time.Now().Add(20 * time.Second)
	for {
		if err := cl.Set(ctx, "k0", "after", time.Minute).Err(); err == nil {
			break
		} else if time.Now().After(deadline) {
			t.Fatalf("k0's slot not writable 20s after its master died: %v (cluster says master is %s)", err, c.MasterFor(t, "k0").Addr())
		}
		time.Sleep(100 * time.Millisecond)
	}
	if now := c.MasterFor(t, "k0"); now == victim {
		t.Fatalf("k0 still served by the killed master %s", victim.Addr())
	}
	victim.Restart()
	c.WaitHealthy(t, 20*time.Second)
}

func TestSentinelPromotesTheReplica(t *testing.T) {
	s := StartSentinel(t, 1)
	before := s.CurrentMaster(t)
	if before != s.Master.Addr() {
		t.Fatalf("sentinels name %s as master, want %s", before, s.Master.Addr())
	}
	s.Master.Kill()
	// A sentinel whose timer ran 2s late (a loaded machine) enters TILT mode
	// and does nothing for 30s: the bound leaves room for one.
	deadline := time.Now().Add(60 * time.Second)
	for s.CurrentMaster(t) != s.Replicas[0].Addr() {
		if time.Now().After(deadline) {
			t.Fatalf("replica %s not promoted within 60s (master now %s)", s.Replicas[0].Addr(), s.CurrentMaster(t))
		}
		time.Sleep(100 * time.Millisecond)
	}
}
