package scaleout

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/factgate/factgate/cache/redistest"
	"github.com/factgate/factgate/interceptors/facts"
)

// sentinelBlock is the cache block of a replica on the master the sentinels at
// addrs watch under name.
func sentinelBlock(name string, addrs []string) string {
	return redisBlock(fmt.Sprintf("master_name: %q\n    addrs: [\"%s\"]", name, strings.Join(addrs, `", "`)))
}

// TestReplicasFollowASentinelFailover runs three replicas on a Redis master watched
// by three sentinels and kills the master. The replicas keep answering, follow the
// sentinels to the promoted replica without a restart, and keep their sessions: a
// session started before the failover, continued while the master was dead, is
// whole afterwards on every replica.
//
// Redis replicates asynchronously: a write the master acknowledged just before it
// died may be lost with it. The test waits for the replica to have the session's
// first segments before the kill, which is what factgate can rely on; what a
// replica wrote while the master was dead waits in its pending writes and reaches
// the promoted master.
func TestReplicasFollowASentinelFailover(t *testing.T) {
	s := redistest.StartSentinel(t, 1)
	f := startFleet(t, 3, sentinelBlock(s.MasterName, s.Addrs()), c17Script)
	a, b, c := f.replicas[0], f.replicas[1], f.replicas[2]
	ctx := context.Background()

	const session = "c17-sentinel"
	keys := []string{a.mustChat(t, part(t, 1), session).info.Key, b.mustChat(t, part(t, 2), session).info.Key}
	setKey := keyPrefix + facts.SessionSetKey(session)
	old := redis.NewClient(&redis.Options{Addr: s.Master.Addr()})
	if n, err := old.SCard(ctx, setKey).Result(); err != nil || n != 2 {
		t.Fatalf("the master holds %d members of %s (%v), want 2", n, setKey, err)
	}
	old.Close()
	waitReplicated(t, s.Master, s.Replicas[0])

	s.Master.Kill()
	// Part 3 goes to the replica that has not seen the session, right away: the
	// sentinels take a second to notice, so it is served while there is no master.
	third := c.mustChat(t, part(t, 3), session)
	keys = append(keys, third.info.Key)
	if third.contradicted() {
		t.Errorf("part 3 with the master dead: a Contradiction the whole session does not give: %s", third)
	}
	for _, r := range f.replicas {
		if got := r.mustChat(t, followUp, session); got.contradicted() {
			t.Errorf("a follow-up with the master dead: a Contradiction the whole session does not give: %s", got)
		}
	}

	// 60s: a sentinel on a loaded machine may spend 30s in TILT mode first.
	eventually(t, 60*time.Second, "the sentinels to promote "+s.Replicas[0].Addr(), func() string {
		if m := s.CurrentMaster(t); m != s.Replicas[0].Addr() {
			return "the master is " + m
		}
		return ""
	})
	promoted := time.Now()
	newMaster := redis.NewClient(&redis.Options{Addr: s.Replicas[0].Addr()})
	defer newMaster.Close()

	// Every replica recovers without a restart, and its writes land on the new master.
	for _, r := range f.replicas {
		eventually(t, 15*time.Second, "replica "+r.name+" ready after the promotion", func() string {
			if status, check := r.readiness(); status != "ready" {
				return status + " " + check
			}
			return ""
		})
		fresh := r.mustChat(t, part(t, 1)+"\n主从切换后 "+r.name, "")
		eventually(t, 15*time.Second, "replica "+r.name+"'s new index on the new master", func() string {
			if n, err := newMaster.Exists(ctx, keyPrefix+facts.SharedKeyPrefix+fresh.info.Key).Result(); err != nil || n != 1 {
				return fmt.Sprintf("exists %d, %v", n, err)
			}
			return ""
		})
	}
	t.Logf("all replicas ready and writing to the new master %s after the promotion", time.Since(promoted).Round(time.Millisecond))

	// The session is whole on the new master and on every replica.
	eventually(t, 15*time.Second, "the session's three segments on the new master", func() string {
		members, err := newMaster.SMembers(ctx, setKey).Result()
		if err != nil || len(members) != 3 {
			return fmt.Sprintf("%s holds %v (%v), want %v", setKey, members, err, keys)
		}
		return ""
	})
	for _, r := range f.replicas {
		got := r.mustChat(t, followUp, session)
		if got.info.Segments != 3 || got.info.MissingSegments != 0 || got.info.SessionUnconfirmed || got.draftSevere() != "" {
			t.Errorf("the session after the failover on %s: want 3 segments, none missing, draft=0", got)
		}
	}
}
