package cache

import (
	"context"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"
)

// pendingWrites are the writes that did not reach Redis while it failed: deletes,
// values written with SetDurable, set members and counter deltas, per key, to be
// replayed when Redis is back. Plain Set values are not kept: a lost cached value
// is rebuilt, while a lost set member, count or durable value (the fact index of a
// session segment, whose text is in no later request) is not. Not safe for
// concurrent use; Tiered guards it with its mutex.
type pendingWrites struct {
	deletes map[string]struct{}
	values  map[string]pendingValue
	sets    map[string]*pendingSet
	hashes  map[string]*pendingHash
	// size counts deletes, values, members and counter fields, against
	// MaxPendingWrites.
	size int
	// bytes is what they hold, against MaxPendingBytes: keys, members, field names
	// and values, each with a fixed overhead.
	bytes int64
	// ownerBytes is what the values written through each cache made by Separate
	// hold (by its owner number), against that cache's share (pendingShare).
	ownerBytes map[uint8]int64
}

// pendingLimits are the bounds of the pending writes: a count and bytes.
type pendingLimits struct {
	writes int
	bytes  int64
}

type pendingValue struct {
	value []byte
	ttl   time.Duration
	// owner is the cache made by Separate the value was written through; 0 for
	// the cache itself.
	owner uint8
}

type pendingSet struct {
	members map[string]struct{}
	ttl     time.Duration
}

type pendingHash struct {
	deltas map[string]int64
	ttl    time.Duration
}

// Heap cost of a pending write beyond its strings and bytes: a map slot and, for
// a key's first write, the set or hash header.
const pendingOverhead = 64

func newPendingWrites() *pendingWrites {
	return &pendingWrites{
		deletes:    map[string]struct{}{},
		values:     map[string]pendingValue{},
		ownerBytes: map[uint8]int64{},
		sets:       map[string]*pendingSet{},
		hashes:     map[string]*pendingHash{},
	}
}

func (p *pendingWrites) empty() bool { return p == nil || p.size == 0 }

// fits reports whether n more writes of b bytes stay within the limits.
func (p *pendingWrites) fits(n int, b int64, limit pendingLimits) bool {
	return p.size+n <= limit.writes && p.bytes+b <= limit.bytes
}

func memberCost(key, member string) int64 { return pendingOverhead + int64(len(key)+len(member)) }
func valueCost(key string, value []byte) int64 {
	return pendingOverhead + int64(len(key)+len(value))
}

// forget drops everything pending for key (a delete that reached Redis supersedes it).
func (p *pendingWrites) forget(key string) {
	if p == nil {
		return
	}
	if _, ok := p.deletes[key]; ok {
		delete(p.deletes, key)
		p.size--
		p.bytes -= pendingOverhead + int64(len(key))
	}
	p.forgetWrites(key)
}

// forgetValue drops the value pending for key (a newer value reached Redis).
func (p *pendingWrites) forgetValue(key string) {
	if p == nil {
		return
	}
	if v, ok := p.values[key]; ok {
		p.size--
		p.bytes -= valueCost(key, v.value)
		if v.owner != 0 {
			p.ownerBytes[v.owner] -= valueCost(key, v.value)
		}
		delete(p.values, key)
	}
}

// forgetWrites drops the value, members and deltas pending for key.
func (p *pendingWrites) forgetWrites(key string) {
	p.forgetValue(key)
	if s, ok := p.sets[key]; ok {
		p.size -= len(s.members)
		for member := range s.members {
			p.bytes -= memberCost(key, member)
		}
		delete(p.sets, key)
	}
	if h, ok := p.hashes[key]; ok {
		p.size -= len(h.deltas)
		for field := range h.deltas {
			p.bytes -= memberCost(key, field)
		}
		delete(p.hashes, key)
	}
}

// addDelete records a delete of key, discarding earlier writes to it. It reports
// false when the bounds leave no room.
func (p *pendingWrites) addDelete(key string, limit pendingLimits) bool {
	p.forgetWrites(key)
	if _, ok := p.deletes[key]; ok {
		return true
	}
	cost := pendingOverhead + int64(len(key))
	if !p.fits(1, cost, limit) {
		return false
	}
	p.deletes[key] = struct{}{}
	p.size++
	p.bytes += cost
	return true
}

// addValue records value under key with its ttl, written through the cache
// numbered owner (0: the cache itself), replacing an older pending value. It
// reports false when the bounds leave no room, or an owner's values would hold
// more than ownerCap bytes (0: no cap of its own); the older value, if any,
// stays. The slice is kept, not copied: the cache owns values after Set.
func (p *pendingWrites) addValue(key string, value []byte, ttl time.Duration, limit pendingLimits, owner uint8, ownerCap int64) bool {
	old, had := p.values[key]
	n, cost := 1, valueCost(key, value)
	if had {
		n, cost = 0, cost-valueCost(key, old.value)
	}
	if !p.fits(n, cost, limit) {
		return false
	}
	if owner != 0 && ownerCap > 0 && p.ownerBytes[owner]+valueCost(key, value) > ownerCap+ownedBy(old, had, owner, key) {
		return false
	}
	if had && old.owner != 0 {
		p.ownerBytes[old.owner] -= valueCost(key, old.value)
	}
	p.values[key] = pendingValue{value: value, ttl: ttl, owner: owner}
	if owner != 0 {
		p.ownerBytes[owner] += valueCost(key, value)
	}
	p.size += n
	p.bytes += cost
	return true
}

// ownedBy is what an older value under key (had) holds of owner's share: the
// room a replacing value takes back.
func ownedBy(old pendingValue, had bool, owner uint8, key string) int64 {
	if had && old.owner == owner {
		return valueCost(key, old.value)
	}
	return 0
}

// addMember records member of the set under key with the set's latest ttl.
func (p *pendingWrites) addMember(key, member string, ttl time.Duration, limit pendingLimits) bool {
	s := p.sets[key]
	if s == nil {
		s = &pendingSet{members: map[string]struct{}{}}
	}
	if _, ok := s.members[member]; !ok {
		cost := memberCost(key, member)
		if !p.fits(1, cost, limit) {
			return false
		}
		s.members[member] = struct{}{}
		p.size++
		p.bytes += cost
	}
	s.ttl = ttl
	p.sets[key] = s
	return true
}

// addDeltas records counter deltas of the hash under key, all or none.
func (p *pendingWrites) addDeltas(key string, deltas map[string]int64, ttl time.Duration, limit pendingLimits) bool {
	h := p.hashes[key]
	if h == nil {
		h = &pendingHash{deltas: map[string]int64{}}
	}
	added := 0
	var cost int64
	for field := range deltas {
		if _, ok := h.deltas[field]; !ok {
			added++
			cost += memberCost(key, field)
		}
	}
	if !p.fits(added, cost, limit) {
		return false
	}
	for field, delta := range deltas {
		h.deltas[field] += delta
	}
	p.size += added
	p.bytes += cost
	h.ttl = ttl
	p.hashes[key] = h
	return true
}

// deleted reports a delete of key waiting to be replayed.
func (p *pendingWrites) deleted(key string) bool {
	if p == nil {
		return false
	}
	_, ok := p.deletes[key]
	return ok
}

// byNamespace counts the writes by the namespace of their key: the part before
// its first ':' (the whole key when it has none). A set's members and a hash's
// fields count one each, as against MaxPendingWrites.
func (p *pendingWrites) byNamespace(into map[string]int) {
	if p == nil {
		return
	}
	ns := func(key string) string {
		if i := strings.IndexByte(key, ':'); i >= 0 {
			return key[:i]
		}
		return key
	}
	for key := range p.deletes {
		into[ns(key)]++
	}
	for key := range p.values {
		into[ns(key)]++
	}
	for key, s := range p.sets {
		into[ns(key)] += len(s.members)
	}
	for key, h := range p.hashes {
		into[ns(key)] += len(h.deltas)
	}
}

// value returns the value pending for key.
func (p *pendingWrites) value(key string) ([]byte, bool) {
	if p == nil {
		return nil, false
	}
	v, ok := p.values[key]
	return v.value, ok
}

// members returns the members pending for key, sorted, and their ttl.
func (p *pendingWrites) members(key string) ([]string, time.Duration) {
	if p == nil || p.sets[key] == nil {
		return nil, 0
	}
	s := p.sets[key]
	return slices.Sorted(maps.Keys(s.members)), s.ttl
}

// deltas returns a copy of the deltas pending for key and their ttl.
func (p *pendingWrites) deltas(key string) (map[string]int64, time.Duration) {
	if p == nil || p.hashes[key] == nil {
		return nil, 0
	}
	h := p.hashes[key]
	return maps.Clone(h.deltas), h.ttl
}

// replay applies the writes to remote — deletes first, then values, so that a set
// member naming a value (a session's segment) never reaches Redis before it, then
// members and deltas — removing each key from p (under mu, since readers consult
// p while it replays) once it reached Redis. It stops at the first error and
// returns it; what is left in p did not reach Redis.
func (p *pendingWrites) replay(ctx context.Context, remote remoteBackend, mu *sync.Mutex) error {
	mu.Lock()
	deletes := slices.Collect(maps.Keys(p.deletes))
	mu.Unlock()
	for _, key := range deletes {
		if err := remote.Delete(ctx, key); err != nil {
			return err
		}
		mu.Lock()
		if _, ok := p.deletes[key]; ok {
			delete(p.deletes, key)
			p.size--
			p.bytes -= pendingOverhead + int64(len(key))
		}
		mu.Unlock()
	}

	mu.Lock()
	values := maps.Clone(p.values)
	mu.Unlock()
	for key, v := range values {
		if err := remote.Set(ctx, key, v.value, v.ttl); err != nil {
			return err
		}
		mu.Lock()
		p.forgetValue(key) // p only loses writes while it replays; new ones go elsewhere
		mu.Unlock()
	}

	mu.Lock()
	sets := make(map[string]pendingSet, len(p.sets))
	for key, s := range p.sets {
		sets[key] = pendingSet{members: maps.Clone(s.members), ttl: s.ttl}
	}
	hashes := make(map[string]pendingHash, len(p.hashes))
	for key, h := range p.hashes {
		hashes[key] = pendingHash{deltas: maps.Clone(h.deltas), ttl: h.ttl}
	}
	mu.Unlock()

	for key, s := range sets {
		if err := remote.addMembers(ctx, key, slices.Sorted(maps.Keys(s.members)), s.ttl); err != nil {
			return err
		}
		mu.Lock()
		if cur := p.sets[key]; cur != nil {
			p.size -= len(cur.members)
			for member := range cur.members {
				p.bytes -= memberCost(key, member)
			}
			delete(p.sets, key)
		}
		mu.Unlock()
	}
	for key, h := range hashes {
		if err := remote.HashIncr(ctx, key, h.deltas, h.ttl); err != nil {
			return err
		}
		mu.Lock()
		if cur := p.hashes[key]; cur != nil {
			p.size -= len(cur.deltas)
			for field := range cur.deltas {
				p.bytes -= memberCost(key, field)
			}
			delete(p.hashes, key)
		}
		mu.Unlock()
	}
	return nil
}

// requeue merges older, unreplayed writes back into p, which holds the writes made
// since. Older values, members and deltas of a key that p has a (newer) delete for
// are dropped: the delete superseded them; so is an older value of a key p has a
// newer value for. Older deletes are kept: deletes replay before writes, so they
// still come before p's newer writes. It returns how many writes the bounds dropped.
func (p *pendingWrites) requeue(older *pendingWrites, limit pendingLimits) (dropped int) {
	if older.empty() {
		return 0
	}
	newerDeletes := maps.Clone(p.deletes)
	for key, v := range older.values {
		if _, superseded := newerDeletes[key]; superseded {
			continue
		}
		if _, newer := p.values[key]; newer {
			continue
		}
		// Admitted under its owner's share once: only the total bounds it now.
		if !p.addValue(key, v.value, v.ttl, limit, v.owner, 0) {
			dropped++
		}
	}
	for key, s := range older.sets {
		if _, superseded := newerDeletes[key]; superseded {
			continue
		}
		ttl := s.ttl
		if cur := p.sets[key]; cur != nil {
			ttl = cur.ttl // the newer ttl wins
		}
		for member := range s.members {
			if !p.addMember(key, member, ttl, limit) {
				dropped++
			}
		}
	}
	for key, h := range older.hashes {
		if _, superseded := newerDeletes[key]; superseded {
			continue
		}
		ttl := h.ttl
		if cur := p.hashes[key]; cur != nil {
			ttl = cur.ttl
		}
		if !p.addDeltas(key, h.deltas, ttl, limit) {
			dropped += len(h.deltas)
		}
	}
	for key := range older.deletes {
		if _, ok := p.deletes[key]; ok {
			continue
		}
		cost := pendingOverhead + int64(len(key))
		if !p.fits(1, cost, limit) {
			dropped++
			continue
		}
		p.deletes[key] = struct{}{}
		p.size++
		p.bytes += cost
	}
	return dropped
}
