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
	// dropped counts segments left out by max_session_segments or the load bound.
	dropped int
	notes   []string
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
	// nothing to merge.
	if own.HasFacts() {
		if err := s.shared.SetAdd(ctx, setKey, key, ttl); err != nil {
			res.notes = append(res.notes, fmt.Sprintf("facts: session %q: adding segment %s to %s failed, merged without recording it: %v", session, key, setKey, err))
		}
	}
	members, err := s.shared.SetMembers(ctx, setKey)
	if err != nil {
		res.notes = append(res.notes, fmt.Sprintf("facts: session %q: reading %s failed, using this request's facts alone: %v", session, setKey, err))
		members = nil
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
	res.ix = merged
	return res
}

func newSegment(key string, ix *Index) segment {
	sg := segment{key: key, ix: ix}
	if len(ix.ops) > 0 {
		sg.start = ix.ops[0].At
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
		s.remember(mk, ix, textBytes(ix))
		return resolved{ix: ix}, nil
	})
	return r.ix, err
}

// abbreviate returns at most n items and a count of the rest.
func abbreviate(items []string, n int) []string {
	if len(items) <= n {
		return items
	}
	return append(slices.Clone(items[:n]), fmt.Sprintf("and %d more", len(items)-n))
}
