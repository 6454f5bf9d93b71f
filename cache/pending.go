package cache

import (
	"context"
	"maps"
	"slices"
	"sync"
	"time"
)

// pendingWrites are the writes that did not reach Redis while it failed: deletes,
// set members and counter deltas, per key, to be replayed when Redis is back. Values
// are not kept: a lost cached value is rebuilt, a lost set member or count is not.
// Not safe for concurrent use; Tiered guards it with its mutex.
type pendingWrites struct {
	deletes map[string]struct{}
	sets    map[string]*pendingSet
	hashes  map[string]*pendingHash
	// size counts deletes, members and counter fields, against the bound.
	size int
}

type pendingSet struct {
	members map[string]struct{}
	ttl     time.Duration
}

type pendingHash struct {
	deltas map[string]int64
	ttl    time.Duration
}

func newPendingWrites() *pendingWrites {
	return &pendingWrites{
		deletes: map[string]struct{}{},
		sets:    map[string]*pendingSet{},
		hashes:  map[string]*pendingHash{},
	}
}

func (p *pendingWrites) empty() bool { return p == nil || p.size == 0 }

// forget drops everything pending for key (a delete that reached Redis supersedes it).
func (p *pendingWrites) forget(key string) {
	if p == nil {
		return
	}
	if _, ok := p.deletes[key]; ok {
		delete(p.deletes, key)
		p.size--
	}
	p.forgetWrites(key)
}

// forgetWrites drops the members and deltas pending for key.
func (p *pendingWrites) forgetWrites(key string) {
	if s, ok := p.sets[key]; ok {
		p.size -= len(s.members)
		delete(p.sets, key)
	}
	if h, ok := p.hashes[key]; ok {
		p.size -= len(h.deltas)
		delete(p.hashes, key)
	}
}

// addDelete records a delete of key, discarding earlier writes to it. It reports
// false when the bound leaves no room.
func (p *pendingWrites) addDelete(key string, limit int) bool {
	p.forgetWrites(key)
	if _, ok := p.deletes[key]; ok {
		return true
	}
	if p.size+1 > limit {
		return false
	}
	p.deletes[key] = struct{}{}
	p.size++
	return true
}

// addMember records member of the set under key with the set's latest ttl.
func (p *pendingWrites) addMember(key, member string, ttl time.Duration, limit int) bool {
	s := p.sets[key]
	if s == nil {
		s = &pendingSet{members: map[string]struct{}{}}
	}
	if _, ok := s.members[member]; !ok {
		if p.size+1 > limit {
			return false
		}
		s.members[member] = struct{}{}
		p.size++
	}
	s.ttl = ttl
	p.sets[key] = s
	return true
}

// addDeltas records counter deltas of the hash under key, all or none.
func (p *pendingWrites) addDeltas(key string, deltas map[string]int64, ttl time.Duration, limit int) bool {
	h := p.hashes[key]
	if h == nil {
		h = &pendingHash{deltas: map[string]int64{}}
	}
	added := 0
	for field := range deltas {
		if _, ok := h.deltas[field]; !ok {
			added++
		}
	}
	if p.size+added > limit {
		return false
	}
	for field, delta := range deltas {
		h.deltas[field] += delta
	}
	p.size += added
	h.ttl = ttl
	p.hashes[key] = h
	return true
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

// replay applies the writes to remote, deletes first, removing each key from p (under
// mu, since readers consult p while it replays) once it reached Redis. It stops at the
// first error and returns it; what is left in p did not reach Redis.
func (p *pendingWrites) replay(ctx context.Context, remote remoteBackend, mu *sync.Mutex) error {
	mu.Lock()
	deletes := slices.Collect(maps.Keys(p.deletes))
	mu.Unlock()
	for _, key := range deletes {
		if err := remote.Delete(ctx, key); err != nil {
			return err
		}
		mu.Lock()
		delete(p.deletes, key)
		p.size--
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
			delete(p.hashes, key)
		}
		mu.Unlock()
	}
	return nil
}

// requeue merges older, unreplayed writes back into p, which holds the writes made
// since. Older members and deltas of a key that p has a (newer) delete for are dropped:
// the delete superseded them. Older deletes are kept: deletes replay before writes, so
// they still come before p's newer writes. It returns how many writes the bound dropped.
func (p *pendingWrites) requeue(older *pendingWrites, limit int) (dropped int) {
	if older.empty() {
		return 0
	}
	newerDeletes := maps.Clone(p.deletes)
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
		if p.size+1 > limit {
			dropped++
			continue
		}
		p.deletes[key] = struct{}{}
		p.size++
	}
	return dropped
}
