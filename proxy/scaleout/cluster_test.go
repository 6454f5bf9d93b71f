package scaleout

import (
	"context"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/factgate/factgate/cache"
	"github.com/factgate/factgate/cache/redistest"
	"github.com/factgate/factgate/configs/units"
	"github.com/factgate/factgate/interceptors/facts"
)

// keyPrefix is the replicas' Redis key prefix (the default).
const keyPrefix = cache.DefaultKeyPrefix

// clusterBlock is the cache block of a replica on the cluster seeded by addrs.
func clusterBlock(addrs []string) string {
	return redisBlock(fmt.Sprintf(`addrs: ["%s"]`, strings.Join(addrs, `", "`)))
}

// TestReplicasShareARedisCluster runs three replicas on a real three-master Redis
// Cluster (one replica each) and checks what they share, then kills the master of a
// session's slot: every request keeps answering from memory, nothing is
// contradicted that the whole session would not contradict, and after the
// replica's promotion (CLUSTER FAILOVER) every replica recovers without a restart.
func TestReplicasShareARedisCluster(t *testing.T) {
	c := redistest.StartCluster(t, 3, 1)
	f := startFleet(t, 3, clusterBlock(c.Addrs()), c17Script)
	a, b, cr := f.replicas[0], f.replicas[1], f.replicas[2]
	view := redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.Addrs(), ClusterStateReloadInterval: 200 * time.Millisecond, MaxRedirects: 8})
	t.Cleanup(func() { view.Close() })
	ctx := context.Background()
	sent := 0 // requests that reached the experiment
	send := func(r *replica, text, session string) answer {
		t.Helper()
		sent++
		return r.mustChat(t, text, session)
	}

	// A session's segments sent round-robin merge on every replica.
	const s1 = "c17-cluster"
	var keys [3]string
	for i, r := range f.replicas {
		keys[i] = send(r, part(t, i+1), s1).info.Key
	}
	for _, r := range f.replicas {
		got := send(r, followUp, s1)
		if got.info.Segments != 3 || got.info.MissingSegments != 0 || got.draftSevere() != "" {
			t.Errorf("session %s on %s: want 3 segments, none missing, draft=0", s1, got)
		}
	}
	if alone := send(a, part(t, 3), ""); alone.draftSevere() == "" {
		t.Errorf("c17's answer against part 3 alone has no issue (%s): the session checks prove nothing", alone)
	}

	// A trace written by one replica is read from another, by the same client only.
	traced := send(cr, part(t, 3), s1)
	eventually(t, 10*time.Second, "C's trace read on A", func() string {
		status, body := a.trace(traced.traceID, clientAuth)
		if status != 200 || !strings.Contains(string(body), traced.traceID) {
			return fmt.Sprintf("%d %.200s", status, body)
		}
		return ""
	})
	if status, body := b.trace(traced.traceID, "Bearer sk-someone-else"); status != 404 {
		t.Errorf("another client reads C's trace on B: %d %.200s", status, body)
	}

	// Fact indexes of different logs, written by every replica.
	for i := range 12 {
		send(f.replicas[i%3], part(t, 1+i%3)+"\n请求 "+strconv.Itoa(i), "")
	}

	// The A/B report of any replica counts every replica's traffic.
	f.waitReportsCount(t, sent, "")

	// The keys spread over the masters; the keys a report reads together share a slot.
	layout := scanMasters(t, c)
	t.Logf("keys per master before the kill: %s", layout)
	layout.check(t, c)
	setKey := keyPrefix + facts.SessionSetKey(s1)
	if n, err := view.SCard(ctx, setKey).Result(); err != nil || n != 3 {
		t.Fatalf("%s holds %d members (%v), want 3", setKey, n, err)
	}

	// Kill the master of the session's slot. Its replica may not take over on its
	// own yet: the outage lasts until the test fails it over.
	victim := c.MasterFor(t, setKey)
	standby := c.ReplicaOf(t, victim)
	if _, err := standby.Do("CONFIG", "SET", "cluster-replica-no-failover", "yes"); err != nil {
		t.Fatal(err)
	}
	// Sessions on the victim's slots, started during the outage and after it.
	s2 := sessionOn(t, c, victim, "c17-outage")
	later := map[string]string{}
	for _, r := range f.replicas {
		later[r.name] = sessionOn(t, c, victim, "after-"+r.name)
	}
	waitReplicated(t, victim, standby)
	recoveries := map[string]int{}
	for _, r := range f.replicas {
		recoveries[r.name] = r.logs.count(recoveredLog)
	}
	victim.Kill()
	killed := time.Now()
	t.Logf("killed master %s (the slot of %s); %s stands by", victim.Addr(), setKey, standby.Addr())

	// Traffic on every replica for the whole outage, each request a log of its own
	// (its index, trace and counters on any master): all answered.
	parts := []string{part(t, 1), part(t, 2), part(t, 3)} // read here: t.Fatal must not run in a goroutine
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var mu sync.Mutex
	var failures []string
	var streamed int
	for w := range 3 {
		r := f.replicas[w]
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				got, err := r.chat(parts[i%3]+"\n宕机 "+strconv.Itoa(w)+"-"+strconv.Itoa(i), "")
				mu.Lock()
				streamed++
				if err != nil || got.status != 200 {
					failures = append(failures, fmt.Sprintf("%v %v", got, err))
				}
				mu.Unlock()
			}
		})
	}

	// The sessions whose set is unreachable: no Contradiction that the whole session
	// would not give. c17's answer is right for the whole log; a replica that cannot
	// know the whole session says its facts are partial (a Warning) instead.
	checkOutage := func(got answer, what string) {
		t.Helper()
		if got.contradicted() {
			t.Errorf("%s during the outage: a Contradiction the whole session does not give: %s", what, got)
		}
	}
	for _, r := range f.replicas {
		checkOutage(send(r, followUp, s1), "session "+s1+"'s follow-up")
	}
	var s2keys []string
	for i, r := range f.replicas {
		got := send(r, part(t, i+1), s2)
		s2keys = append(s2keys, got.info.Key)
		checkOutage(got, fmt.Sprintf("session %s's part %d", s2, i+1))
		if !got.info.SessionUnconfirmed {
			t.Errorf("session %s's part %d during the outage: the set on the dead master was not reported unconfirmed: %s", s2, i+1, got)
		}
	}
	// Keep the traffic up for a few probe intervals: a call that reaches a live
	// master after an error backoff would end the outage if a call could.
	eventually(t, 30*time.Second, "traffic during the outage", func() string {
		mu.Lock()
		defer mu.Unlock()
		if streamed < 60 || time.Since(killed) < 2*time.Second {
			return fmt.Sprintf("%d requests in %s", streamed, time.Since(killed).Round(time.Millisecond))
		}
		return ""
	})
	t.Logf("%d requests answered during the outage", streamed)
	close(stop)
	wg.Wait()
	sent += streamed
	for _, fail := range failures {
		t.Errorf("during the outage: %s", fail)
	}

	// Every replica says it is degraded, and stays so until the slots are served
	// again: a call that reaches a live master ends no outage (the cache would
	// flap, replaying and re-publishing every time).
	for _, r := range f.replicas {
		if n := cacheErrors(t, r); n == 0 {
			t.Errorf("replica %s counted no Redis error during the outage", r.name)
		}
		eventually(t, 5*time.Second, "replica "+r.name+" degraded during the outage", func() string {
			if status, check := r.readiness(); status != "degraded" || !strings.Contains(check, victim.Addr()) {
				return status + " " + check
			}
			return ""
		})
		if n := r.logs.count(recoveredLog) - recoveries[r.name]; n > 0 {
			t.Errorf("replica %s's cache recovered %d time(s) while a master was dead", r.name, n)
		}
	}

	// The operator fails the dead master's slots over to its replica.
	if _, err := standby.Do("CLUSTER", "FAILOVER", "FORCE"); err != nil {
		t.Fatalf("CLUSTER FAILOVER FORCE on %s: %v", standby.Addr(), err)
	}
	eventually(t, 20*time.Second, "the promotion of "+standby.Addr(), func() string {
		if m := c.MasterFor(t, setKey); m != standby {
			return "the slot's master is " + m.Addr()
		}
		return ""
	})
	c.WaitHealthy(t, 20*time.Second)
	promoted := time.Now()

	// Every replica recovers without a restart: ready, its writes reach the
	// promoted master, and what it kept during the outage is there too.
	for _, r := range f.replicas {
		eventually(t, 15*time.Second, "replica "+r.name+" ready after the failover", func() string {
			if status, check := r.readiness(); status != "ready" {
				return status + " " + check
			}
			return ""
		})
		send(r, part(t, 1), later[r.name])
		key := keyPrefix + facts.SessionSetKey(later[r.name])
		eventually(t, 15*time.Second, "replica "+r.name+"'s new session on the promoted master", func() string {
			n, err := view.SCard(ctx, key).Result()
			if err != nil || n != 1 {
				return fmt.Sprintf("%s: %d members, %v", key, n, err)
			}
			return ""
		})
	}
	t.Logf("all replicas ready and writing %s after the promotion", time.Since(promoted).Round(time.Millisecond))
	s2set := keyPrefix + facts.SessionSetKey(s2)
	eventually(t, 15*time.Second, "session "+s2+"'s segments replayed to the promoted master", func() string {
		members, err := view.SMembers(ctx, s2set).Result()
		slices.Sort(members)
		want := slices.Clone(s2keys)
		slices.Sort(want)
		if err != nil || !slices.Equal(members, want) {
			return fmt.Sprintf("%s holds %v (%v), want %v", s2set, members, err, want)
		}
		for _, k := range s2keys {
			if n, err := view.Exists(ctx, keyPrefix+facts.SharedKeyPrefix+k).Result(); err != nil || n != 1 {
				return fmt.Sprintf("segment index %s: exists %d, %v", k, n, err)
			}
		}
		return ""
	})
	for _, s := range []string{s1, s2} {
		for _, r := range f.replicas {
			got := send(r, followUp, s)
			if got.info.Segments != 3 || got.info.MissingSegments != 0 || got.draftSevere() != "" {
				t.Errorf("session %s after the failover on %s: want 3 segments, none missing, draft=0", s, got)
			}
		}
	}

	// The killed master comes back as a replica; the cluster and the replicas stay healthy.
	victim.Restart()
	c.WaitHealthy(t, 20*time.Second)
	for _, r := range f.replicas {
		eventually(t, 15*time.Second, "replica "+r.name+" ready with the old master back", func() string {
			if status, check := r.readiness(); status != "ready" {
				return status + " " + check
			}
			return ""
		})
	}
	f.waitReportsCount(t, sent, " after the failover")
}

// recoveredLog is what a replica logs when its cache recovers from an outage.
const recoveredLog = "redis answers again; cache recovered"

// sessionOn returns a session id starting with base whose segment set lands on
// master's slots.
func sessionOn(t *testing.T, c *redistest.Cluster, master *redistest.Node, base string) string {
	t.Helper()
	for i := range 1000 {
		id := base + "-" + strconv.Itoa(i)
		if c.MasterFor(t, keyPrefix+facts.SessionSetKey(id)) == master {
			return id
		}
	}
	t.Fatalf("no session id %s-N of 1000 lands on %s", base, master.Addr())
	return ""
}

var replOffset = regexp.MustCompile(`(?m)^(master_repl_offset|slave_repl_offset):(\d+)`)

// waitReplicated waits until replica has processed everything master wrote so far
// (replication is asynchronous: a write acknowledged just before a master dies may
// be lost with it).
func waitReplicated(t *testing.T, master, replica *redistest.Node) {
	t.Helper()
	offset := func(n *redistest.Node, field string) int64 {
		info, err := n.Do("INFO", "replication")
		if err != nil {
			return -1
		}
		for _, m := range replOffset.FindAllStringSubmatch(fmt.Sprint(info), -1) {
			if m[1] == field {
				v, _ := strconv.ParseInt(m[2], 10, 64)
				return v
			}
		}
		return -1
	}
	want := offset(master, "master_repl_offset")
	eventually(t, 10*time.Second, "replication to "+replica.Addr(), func() string {
		if got := offset(replica, "slave_repl_offset"); got < want {
			return fmt.Sprintf("replica at offset %d, master at %d", got, want)
		}
		return ""
	})
}

// cacheErrors returns the replica's factgate_cache_errors_total over every op.
func cacheErrors(t *testing.T, r *replica) float64 {
	t.Helper()
	families, err := r.srv.Metrics().Gather()
	if err != nil {
		t.Fatal(err)
	}
	var sum float64
	for _, f := range families {
		if f.GetName() == "factgate_cache_errors_total" {
			for _, m := range f.GetMetric() {
				sum += m.GetCounter().GetValue()
			}
		}
	}
	return sum
}

// keyLayout is which master holds which of factgate's keys, by kind.
type keyLayout map[string]map[string][]string // master addr → kind → keys

func (l keyLayout) String() string {
	var parts []string
	for _, m := range slices.Sorted(maps.Keys(l)) {
		var kinds []string
		for _, k := range slices.Sorted(maps.Keys(l[m])) {
			kinds = append(kinds, fmt.Sprintf("%s %d", k, len(l[m][k])))
		}
		parts = append(parts, m+": "+strings.Join(kinds, ", "))
	}
	return strings.Join(parts, "; ")
}

// scanMasters SCANs every master for factgate's keys.
func scanMasters(t *testing.T, c *redistest.Cluster) keyLayout {
	t.Helper()
	l := keyLayout{}
	for _, m := range c.Masters {
		cl := redis.NewClient(&redis.Options{Addr: m.Addr()})
		keys, err := scanAll(cl, keyPrefix+"*")
		cl.Close()
		if err != nil {
			t.Fatalf("SCAN %s: %v", m.Addr(), err)
		}
		l[m.Addr()] = map[string][]string{}
		for _, k := range keys {
			kind, _, _ := strings.Cut(strings.TrimPrefix(k, keyPrefix), ":")
			l[m.Addr()][kind] = append(l[m.Addr()][kind], k)
		}
	}
	return l
}

func scanAll(cl *redis.Client, match string) ([]string, error) {
	var out []string
	iter := cl.Scan(context.Background(), 0, match, 1000).Iterator()
	for iter.Next(context.Background()) {
		out = append(out, iter.Val())
	}
	return out, iter.Err()
}

// check asserts the layout: fact indexes and traces spread over the masters, every
// key on the master its slot names, and the counters of one experiment (read
// together by the report) on one slot.
func (l keyLayout) check(t *testing.T, c *redistest.Cluster) {
	t.Helper()
	spread := map[string]int{}
	experimentSlots := map[string]bool{}
	probe := c.Masters[0]
	for addr, kinds := range l {
		for kind, keys := range kinds {
			spread[kind]++
			for _, k := range keys {
				if owner := c.MasterFor(t, k); owner.Addr() != addr {
					t.Errorf("%s is on %s, but its slot is %s's", k, addr, owner.Addr())
				}
				if kind == "experiment" {
					slot, err := probe.Do("CLUSTER", "KEYSLOT", k)
					if err != nil {
						t.Fatal(err)
					}
					experimentSlots[fmt.Sprint(slot)] = true
				}
			}
		}
	}
	if spread["facts"] < 2 {
		t.Errorf("fact indexes on %d of %d masters: %s", spread["facts"], len(c.Masters), l)
	}
	if spread["trace"] < 2 {
		t.Errorf("traces on %d master(s): %s", spread["trace"], l)
	}
	if len(experimentSlots) != 1 {
		t.Errorf("the experiment's counters are on %d slots, want one (its hash tag): %s", len(experimentSlots), l)
	}
}

// TestRedisClusterCallsFollowAPromotion: factgate's Redis client on a cluster
// whose master dies and whose replica takes over on its own. Calls on the dead
// master's slots fail until the promotion, then succeed again within seconds,
// with no ping in between: each failed call has the client re-read the slot map.
// go-redis alone keeps its slot map for 60s and does not re-read it when the old
// master is gone (no MOVED comes from a dead node), so calls kept failing for up
// to a minute.
func TestRedisClusterCallsFollowAPromotion(t *testing.T) {
	c := redistest.StartCluster(t, 3, 1)
	r, err := cache.NewRedis(cache.RedisConfig{Addrs: c.Addrs(), DialTimeout: units.Duration(time.Second),
		ReadTimeout: units.Duration(time.Second), WriteTimeout: units.Duration(time.Second)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	ctx := context.Background()
	victim := c.Masters[1]
	var key string
	for i := 0; key == ""; i++ {
		if k := "promotion-" + strconv.Itoa(i); c.MasterFor(t, keyPrefix+k) == victim {
			key = k
		}
	}
	if err := r.Set(ctx, key, []byte("before"), time.Minute); err != nil {
		t.Fatalf("Set before the kill: %v", err)
	}

	victim.Kill()
	if err := r.Set(ctx, key, []byte("dead"), time.Minute); err == nil {
		t.Fatal("Set on the dead master's slot succeeded")
	}
	eventually(t, 30*time.Second, "the replica's promotion", func() string {
		if m := c.MasterFor(t, keyPrefix+key); m == victim {
			return "the slot is still " + m.Addr() + "'s"
		}
		return ""
	})
	promoted := time.Now()
	var last error
	eventually(t, 10*time.Second, "a Set on the promoted master", func() string {
		if last = r.Set(ctx, key, []byte("after"), time.Minute); last != nil {
			return last.Error()
		}
		return ""
	})
	t.Logf("calls on the slot succeed %s after the promotion", time.Since(promoted).Round(time.Millisecond))
	if got, ok, err := r.Get(ctx, key); err != nil || !ok || string(got) != "after" {
		t.Errorf("Get after the promotion: %q %v %v", got, ok, err)
	}
	if st := r.Status(); st.Degraded {
		t.Errorf("Status after the promotion: %+v", st)
	}
}
