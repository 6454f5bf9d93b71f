package facts

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/factgate/factgate/cache"
)

// SessionSetKey returns the shared-cache key of a session's set of fact keys:
// "session:{id}:facts". Every key of one session carries the same hash tag, so
// they land on one Redis Cluster slot. An id longer than 128 bytes or with bytes
// other than ASCII letters, digits and ._:- is replaced by "sha256:" and the hex
// SHA-256 of it, which keeps keys printable and bounded.
func SessionSetKey(session string) string {
	return "session:" + cache.HashTag(sessionTag(session)) + ":facts"
}

func sessionTag(id string) string {
	if len(id) <= 128 && strings.IndexFunc(id, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == ':' || r == '-')
	}) < 0 {
		return id
	}
	sum := sha256.Sum256([]byte(id))
	return "sha256:" + hex.EncodeToString(sum[:])
}

// segment is one session segment's index under its fact key.
type segment struct {
	key   string
	ix    *Index
	start time.Duration // its first operation's time
}

// sessionResult is what merging a session gave.
type sessionResult struct {
	ix *Index
	// segments merged, the request's own included.
	segments int
	// missing lists members whose index no tier holds any more.
	missing []string
	// unconfirmed is set when the session's set could not be read from the shared
	// cache (it failed): segments other replicas added may be unknown here.
	unconfirmed bool
	// dropped counts segments left out by max_session_segments or the load bound.
	dropped int
	notes   []string
}

// sessionRecord is what this replica knows of a session: the fact keys it saw in
// the session's set (its own segments and the others it merged), so that a shared
// cache that lost the set (a Redis restarted empty, an evicted key) gets them back
// instead of a replica merging a partial session as if it were whole. It lives
// as long as the session's set would (session_ttl from the latest segment this
// replica added). Immutable once stored.
type sessionRecord struct {
	members []string // sorted
	until   time.Time
}

// recordBytes is a record's cost against the memory tier.
func recordBytes(setKey string, members []string) int64 {
	n := memoryEntryOverhead + int64(len(recordKeyPrefix)+len(setKey)) + 64
	for _, m := range members {
		n += int64(len(m)) + 16
	}
	return n
}

// session records the request's segment in the session's set, reads the set and
// merges the indexes of its members. own is the request's index under key (nil
// and "" when the request carried no text: a follow-up question is checked
// against the session's facts so far). The request's own segment is always part
// of the result, even when the set cannot be written or read.
func (s *store) session(ctx context.Context, session, key string, own *Index, ttl time.Duration, maxSegments int) sessionResult {
	var res sessionResult
	setKey := SessionSetKey(session)
	// Only segments with facts join the session: a question without a log adds
	// nothing to merge. The segment's index is in the shared cache, durably, before
	// the set names it, so that no replica finds the name without the index.
	if own.HasFacts() {
		s.ensurePublished(ctx, key, own)
		if err := s.shared.SetAdd(ctx, setKey, key, ttl); err != nil {
			res.notes = append(res.notes, fmt.Sprintf("facts: session %q: adding segment %s to %s failed, merged without recording it: %v", session, key, setKey, err))
		}
	}
	members, confirmed, err := cache.SetMembersConfirmed(ctx, s.shared, setKey)
	record, _ := s.record(setKey)
	switch {
	case err != nil:
		members = nil
		res.notes = append(res.notes, fmt.Sprintf("facts: session %q: reading %s failed: %v", session, setKey, err))
	case !confirmed:
		res.notes = append(res.notes, fmt.Sprintf("facts: session %q: the shared cache is failing; %s was read from this replica's memory, which lacks the segments other replicas added since", session, setKey))
	}
	if !confirmed {
		// Merge what this replica knows, but the facts may be partial: checked
		// against them, a citation of another replica's segment would be "not in
		// the replay".
		res.unconfirmed = true
		if record != nil {
			members = unionSorted(members, record.members)
		}
	} else if record != nil {
		if lost := missingFrom(members, record.members); len(lost) > 0 {
			republished := s.restore(ctx, setKey, lost, time.Until(record.until))
			res.notes = append(res.notes, fmt.Sprintf("facts: session %q: the shared cache had lost %d segment(s) this replica knew (%s); added them back, %d with their index from this replica's memory", session, len(lost), strings.Join(abbreviate(lost, 8), ", "), republished))
			members = unionSorted(members, lost)
		}
	}

	var segs []segment
	if own.HasFacts() {
		segs = append(segs, newSegment(key, own))
	}
	// Loading is bounded too: a session with thousands of members (a client
	// reusing one id forever) must not cost thousands of reads per request.
	loadBound := 4 * maxSegments
	for _, m := range members {
		if m == key {
			continue
		}
		if len(segs) >= loadBound {
			res.dropped++
			continue
		}
		ix, _, err := s.load(ctx, m)
		if ix == nil {
			res.missing = append(res.missing, m)
			if err != nil {
				res.notes = append(res.notes, fmt.Sprintf("facts: session %q: %v", session, err))
			}
			continue
		}
		if ix.HasFacts() {
			segs = append(segs, newSegment(m, ix))
		}
	}
	if len(res.missing) > 0 {
		res.notes = append(res.notes, fmt.Sprintf("facts: session %q: %d segment(s) gone from every cache tier were left out: %s", session, len(res.missing), strings.Join(abbreviate(res.missing, 8), ", ")))
	}
	s.updateRecord(setKey, record, own.HasFacts(), key, members, ttl, loadBound)

	segs, dropped := chooseSegments(segs, key, maxSegments)
	res.dropped += dropped
	if res.dropped > 0 {
		res.notes = append(res.notes, fmt.Sprintf("facts: session %q: %d segment(s) beyond max_session_segments (%d) were left out", session, res.dropped, maxSegments))
	}
	res.segments = len(segs)
	switch len(segs) {
	case 0:
		res.ix = own
		return res
	case 1:
		res.ix = segs[0].ix
		return res
	}
	merged, err := s.merged(ctx, segs)
	if err != nil {
		res.notes = append(res.notes, fmt.Sprintf("facts: session %q: merging %d segments failed, using this request's facts alone: %v", session, len(segs), err))
		res.ix, res.segments = own, 0
		if own.HasFacts() {
			res.segments = 1
		}
		return res
	}
	res.ix = overlayRecords(merged, own)
	return res
}

func newSegment(key string, ix *Index) segment {
	sg := segment{key: key, ix: ix}
	if len(ix.recs) > 0 {
		sg.start = ix.recs[0].at
	}
	return sg
}

// chooseSegments orders segments by game time (a log sent in parts is sent in
// time order; ties by key) and keeps at most max of them: the request's own (key)
// and the others closest before it, then those after it. Without an own segment
// (key ""), the latest ones are kept. It returns the kept segments in time order
// and how many it left out.
func chooseSegments(segs []segment, key string, max int) ([]segment, int) {
	slices.SortFunc(segs, func(a, b segment) int {
		if a.start != b.start {
			if a.start < b.start {
				return -1
			}
			return 1
		}
		return strings.Compare(a.key, b.key)
	})
	if len(segs) <= max {
		return segs, 0
	}
	own := slices.IndexFunc(segs, func(sg segment) bool { return sg.key == key })
	if own < 0 {
		return segs[len(segs)-max:], len(segs) - max
	}
	// Take the own segment, then the nearest before it, then after it.
	lo, hi := own, own+1
	for hi-lo < max {
		if lo > 0 {
			lo--
		} else {
			hi++
		}
	}
	return segs[lo:hi], len(segs) - max
}

// merged returns the merge of segs (in time order), from memory when the same
// segments were merged before, under a key derived from their fact keys in order.
// An error is a panic in Merge, turned into an error by the flight.
func (s *store) merged(ctx context.Context, segs []segment) (*Index, error) {
	h := sha256.New()
	for _, sg := range segs {
		h.Write([]byte(sg.key))
		h.Write([]byte{'\n'})
	}
	mk := mergedKeyPrefix + hex.EncodeToString(h.Sum(nil)[:16])
	if e, ok := s.memory.Get(mk); ok {
		return e.ix, nil
	}
	r, _, err := s.flight.Do(ctx, mk, func(context.Context) (resolved, error) {
		if e, ok := s.memory.Get(mk); ok {
			return resolved{ix: e.ix}, nil
		}
		indexes := make([]*Index, len(segs))
		for i, sg := range segs {
			indexes[i] = sg.ix
		}
		ix := Merge(indexes...)
		s.remember(mk, ix)
		return resolved{ix: ix}, nil
	})
	return r.ix, err
}

// record returns this replica's record of the session under setKey.
func (s *store) record(setKey string) (*sessionRecord, bool) {
	e, ok := s.memory.Get(recordKeyPrefix + setKey)
	if !ok || e.record == nil {
		return nil, false
	}
	return e.record, true
}

// updateRecord stores what this replica now knows of the session: the members
// read (key included) joined to the old record, at most bound of them. A request
// with a segment of its own (added) restarts the record's life, as SetAdd restarts
// the set's; a follow-up question only adds to an existing record.
func (s *store) updateRecord(setKey string, old *sessionRecord, added bool, key string, members []string, ttl time.Duration, bound int) {
	if old == nil && !added {
		return
	}
	next := &sessionRecord{}
	if old != nil {
		next.members, next.until = old.members, old.until
	}
	if added {
		next.until = time.Now().Add(ttl)
		members = unionSorted(members, []string{key})
	}
	if merged := unionSorted(next.members, members); len(merged) != len(next.members) || added {
		if len(merged) > bound {
			merged = merged[:bound] // a session past the load bound: the set itself has the rest
		}
		next.members = merged
		left := time.Until(next.until)
		if left <= 0 {
			return
		}
		s.memory.Put(recordKeyPrefix+setKey, memoryEntry{record: next, size: recordBytes(setKey, next.members)}, left)
	}
}

// restore adds members back to the session's set and publishes those whose index
// this replica holds in memory; it returns how many it published.
func (s *store) restore(ctx context.Context, setKey string, members []string, ttl time.Duration) int {
	if ttl <= 0 {
		return 0
	}
	published := 0
	for _, m := range members {
		if e, ok := s.memory.Get(m); ok && e.ix != nil {
			s.publish(ctx, m, e.ix)
			if e.published != nil {
				e.published.Store(true)
			}
			published++
		}
		if err := s.shared.SetAdd(ctx, setKey, m, ttl); err != nil && s.log != nil {
			s.log.Warn("facts: restoring a session segment to the shared cache", "set", setKey, "segment", m, "error", err)
		}
	}
	return published
}

// republishSessions writes every session this replica knows back to the shared
// cache, members and the indexes it holds: the shared tier answers again after an
// outage and may have come back empty. It runs in the background (cache.Durable's
// OnRecover), so the other replicas find the whole session again before this one
// sees another request of it.
func (s *store) republishSessions(ctx context.Context) {
	sessions, segments := 0, 0
	s.memory.Range(func(key string, e memoryEntry) bool {
		if e.record == nil || ctx.Err() != nil {
			return ctx.Err() == nil
		}
		setKey := strings.TrimPrefix(key, recordKeyPrefix)
		segments += s.restore(ctx, setKey, e.record.members, time.Until(e.record.until))
		sessions++
		return true
	})
	if sessions > 0 && s.log != nil {
		s.log.Info("facts: the shared cache recovered; re-published the sessions this replica knows", "sessions", sessions, "indexes", segments)
	}
}

// missingFrom returns the items of want (sorted) that have (sorted) lacks.
func missingFrom(have, want []string) []string {
	var out []string
	for _, w := range want {
		if _, ok := slices.BinarySearch(have, w); !ok {
			out = append(out, w)
		}
	}
	return out
}

func unionSorted(a, b []string) []string {
	out := make([]string, 0, len(a)+len(b))
	out = append(out, a...)
	out = append(out, b...)
	slices.Sort(out)
	return slices.Compact(out)
}

// abbreviate returns at most n items and a count of the rest.
func abbreviate(items []string, n int) []string {
	if len(items) <= n {
		return items
	}
	return append(slices.Clone(items[:n]), fmt.Sprintf("and %d more", len(items)-n))
}
