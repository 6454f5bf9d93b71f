package facts

import (
	"context"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/factgate/factgate/cache"
)

// The c17 citation: base 246 packed up at 1:24, seen only in part 1.
var packAt124 = Evidence{Type: "power", At: 84 * time.Second, Params: []string{"SpecialPower_PackReplaceSelf", "246"}}

// TestSessionMerge sends c17's three segments as one session — to one replica,
// and spread over two replicas sharing a cache — and checks that the index used
// for part 3 answers what part 3 alone cannot.
func TestSessionMerge(t *testing.T) {
	t.Parallel()
	parts := []string{
		replay(t, "allied_vs_soviet.part1.txt"),
		replay(t, "allied_vs_soviet.part2.txt"),
		replay(t, "allied_vs_soviet.part3.txt"),
	}
	whole := Merge(extract(t, parts[0]), extract(t, parts[1]), extract(t, parts[2]))
	alone := extract(t, parts[2])
	if _, ok := alone.Match(packAt124, 500*time.Millisecond); ok || alone.UsedPower(246, "SpecialPower_PackReplaceSelf") {
		t.Fatal("fixture: part 3 alone already shows 246's pack at 1:24")
	}

	tests := []struct {
		name    string
		replica []int // which replica gets part 1, 2, 3
	}{
		{"one replica", []int{0, 0, 0}},
		{"parts 1 and 3 on A, part 2 on B", []int{0, 1, 0}},
		{"each part on another replica than the last", []int{1, 0, 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			shared := newMemoryCache()
			replicas := []*testStage{newStage(t, shared, Config{}), newStage(t, shared, Config{})}
			session := "c17-" + strings.ReplaceAll(tt.name, " ", "-")
			var last result
			for i, part := range parts {
				r := replicas[tt.replica[i]]
				last = r.request(t, session, part)
				r.settle()
				if last.info.Segments != i+1 {
					t.Fatalf("part %d: merged %d segments, want %d", i+1, last.info.Segments, i+1)
				}
			}
			ix := last.ix
			if op, ok := ix.Match(packAt124, 500*time.Millisecond); !ok || op.At != packAt124.At {
				t.Errorf("the merged index does not find 246's pack at 1:24 (got %v, %v)", op, ok)
			}
			if !ix.UsedPower(246, "SpecialPower_PackReplaceSelf") || !ix.ActedAs(246, RoleBuilder) {
				t.Error("the merged index does not know 246 as a builder that packed up")
			}
			if ix.Len() != whole.Len() || ix.End() != whole.End() {
				t.Errorf("merged %d ops ending %v, want %d ending %v", ix.Len(), ix.End(), whole.Len(), whole.End())
			}
			members, _ := shared.SetMembers(context.Background(), SessionSetKey(session))
			if len(members) != 3 || !slices.Contains(members, last.info.Key) {
				t.Errorf("session set %v, want the three fact keys", members)
			}
			if notes := strings.Join(last.trace.Notes, "\n"); !strings.Contains(notes, "merged 3 segments") {
				t.Errorf("the trace does not say what was merged:\n%s", notes)
			}
		})
	}
}

// TestSessionSegmentGone: a member of the session whose index expired everywhere
// is skipped and reported, and the rest is merged.
func TestSessionSegmentGone(t *testing.T) {
	t.Parallel()
	shared := newMemoryCache()
	s := newStage(t, shared, Config{})
	const gone = "0123456789abcdef0123456789abcdef"
	_ = shared.SetAdd(context.Background(), SessionSetKey("s-gone"), gone, time.Hour)
	s.request(t, "s-gone", replay(t, "allied_vs_soviet.part1.txt"))
	r := s.request(t, "s-gone", replay(t, "allied_vs_soviet.part2.txt"))
	if r.info.Segments != 2 || r.info.MissingSegments != 1 {
		t.Fatalf("segments %d, missing %d; want 2 and 1", r.info.Segments, r.info.MissingSegments)
	}
	if !r.ix.ActedAs(246, RoleBuilder) {
		t.Error("part 1's facts are missing from the merge")
	}
	if notes := strings.Join(r.trace.Notes, "\n"); !strings.Contains(notes, "gone from every cache tier were left out: "+gone) {
		t.Errorf("the trace does not name the missing segment:\n%s", notes)
	}
}

// TestSessionFollowUpWithoutLog: a question sent in a session without a log is
// checked against the session's facts and adds nothing to the session.
func TestSessionFollowUpWithoutLog(t *testing.T) {
	t.Parallel()
	shared := newMemoryCache()
	s := newStage(t, shared, Config{})
	s.request(t, "s-follow", replay(t, "allied_vs_soviet.part1.txt"))
	s.request(t, "s-follow", replay(t, "allied_vs_soviet.part2.txt"))
	r := s.request(t, "s-follow", "And what did 246 do at 1:24?")
	if r.info.Segments != 2 {
		t.Fatalf("a follow-up merged %d segments, want 2", r.info.Segments)
	}
	if _, ok := r.ix.Match(packAt124, 0); !ok {
		t.Error("the follow-up's index lacks the session's facts")
	}
	if members, _ := shared.SetMembers(context.Background(), SessionSetKey("s-follow")); len(members) != 2 {
		t.Errorf("the follow-up joined the session: %v", members)
	}
}

// TestSessionMergeIsRemembered: the same segments merged again come from memory.
func TestSessionMergeIsRemembered(t *testing.T) {
	t.Parallel()
	s := newStage(t, nil, Config{})
	p1, p2 := replay(t, "allied_vs_soviet.part1.txt"), replay(t, "allied_vs_soviet.part2.txt")
	s.request(t, "s-again", p1)
	a := s.request(t, "s-again", p2)
	b := s.request(t, "s-again", p2)
	if a.ix != b.ix || a.info.Segments != 2 {
		t.Fatalf("the same session segments merged twice into different indexes (%p, %p)", a.ix, b.ix)
	}
}

func TestChooseSegments(t *testing.T) {
	t.Parallel()
	seg := func(key string, start int) segment {
		return segment{key: key, start: time.Duration(start) * time.Minute}
	}
	all := []segment{seg("e", 20), seg("a", 0), seg("c", 10), seg("b", 5), seg("d", 15)}
	tests := []struct {
		name    string
		own     string
		max     int
		want    []string
		dropped int
	}{
		{name: "under the bound: all, in time order", own: "c", max: 8, want: []string{"a", "b", "c", "d", "e"}},
		{name: "own and those just before it", own: "d", max: 3, want: []string{"b", "c", "d"}},
		{name: "own first: the ones after it", own: "a", max: 3, want: []string{"a", "b", "c"}},
		{name: "own in the middle, few before", own: "b", max: 4, want: []string{"a", "b", "c", "d"}},
		{name: "no own segment: the latest", own: "", max: 2, want: []string{"d", "e"}},
		{name: "bound of one: own alone", own: "c", max: 1, want: []string{"c"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, dropped := chooseSegments(slices.Clone(all), tt.own, tt.max)
			var keys []string
			for _, sg := range got {
				keys = append(keys, sg.key)
			}
			if !slices.Equal(keys, tt.want) || dropped != len(all)-len(tt.want) {
				t.Fatalf("chose %v (dropped %d), want %v", keys, dropped, tt.want)
			}
		})
	}
}

func TestSessionBound(t *testing.T) {
	t.Parallel()
	s := newStage(t, nil, Config{MaxSessionSegments: 2})
	s.request(t, "s-bound", replay(t, "allied_vs_soviet.part1.txt"))
	s.request(t, "s-bound", replay(t, "allied_vs_soviet.part2.txt"))
	r := s.request(t, "s-bound", replay(t, "allied_vs_soviet.part3.txt"))
	if r.info.Segments != 2 || r.info.DroppedSegments != 1 {
		t.Fatalf("segments %d, dropped %d; want 2 and 1", r.info.Segments, r.info.DroppedSegments)
	}
	// Parts 2 and 3 are kept: the segment just before the request's own.
	if _, ok := r.ix.Match(packAt124, 0); ok {
		t.Error("part 1 was merged although the bound keeps the nearest segment before part 3")
	}
	if r.ix.Count("produce") == extract(t, replay(t, "allied_vs_soviet.part3.txt")).Count("produce") {
		t.Error("part 2 was not merged")
	}
	if notes := strings.Join(r.trace.Notes, "\n"); !strings.Contains(notes, "beyond max_session_segments (2)") {
		t.Errorf("the trace does not say segments were left out:\n%s", notes)
	}
}

func TestSessionSetKey(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, session, want string
	}{
		{"plain id", "abc-123", "session:{abc-123}:facts"},
		{"uuid", "6f1c9a6e-0b7e-4c43-9a52-1f6b2b9c3d10", "session:{6f1c9a6e-0b7e-4c43-9a52-1f6b2b9c3d10}:facts"},
		{"braces are hashed", "a}b", "session:{sha256:"},
		{"non-ASCII is hashed", "会话一", "session:{sha256:"},
		{"long ids are hashed", strings.Repeat("x", 129), "session:{sha256:"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := SessionSetKey(tt.session)
			if !strings.HasPrefix(got, tt.want) || !strings.HasSuffix(got, "}:facts") || strings.Count(got, "{") != 1 {
				t.Fatalf("SessionSetKey(%q) = %q, want %q...", tt.session, got, tt.want)
			}
		})
	}
	if SessionSetKey("a}b") == SessionSetKey("a}c") {
		t.Error("two hashed ids share a key")
	}
}

func TestSessionsArePerClientWithProxyKeys(t *testing.T) {
	t.Parallel()
	s := newStage(t, nil, Config{})
	p1, p2 := replay(t, "allied_vs_soviet.part1.txt"), replay(t, "allied_vs_soviet.part2.txt")
	s.requestAs(t, "alice", "shared-id", p1)
	s.settle()
	bob := s.requestAs(t, "bob", "shared-id", p2)
	if bob.info.Segments != 1 {
		t.Fatalf("bob's request merged %d segments: another client's log joined his session", bob.info.Segments)
	}
	alice := s.requestAs(t, "alice", "shared-id", p2)
	if alice.info.Segments != 2 {
		t.Fatalf("alice's own segments: %d merged, want 2", alice.info.Segments)
	}
}

// TestSessionRestoresWhatTheSharedCacheLost: the shared cache loses a session's
// set and a segment's index (a Redis restarted empty). The replica that knew the
// session puts the members back, with the index it holds in memory, so a second
// replica sharing the cache merges the whole session again; and a segment no
// tier holds any more is reported missing rather than silently left out.
func TestSessionRestoresWhatTheSharedCacheLost(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	parts := []string{
		replay(t, "allied_vs_soviet.part1.txt"),
		replay(t, "allied_vs_soviet.part2.txt"),
		replay(t, "allied_vs_soviet.part3.txt"),
	}
	shared := newMemoryCache()
	a, b := newStage(t, shared, Config{}), newStage(t, shared, Config{})
	const session = "c17-lost"
	first := a.request(t, session, parts[0])
	a.settle()
	a.request(t, session, parts[1])
	a.settle()

	// The shared tier loses everything.
	_ = shared.Delete(ctx, SessionSetKey(session))
	_ = shared.Delete(ctx, SharedKeyPrefix+first.info.Key)

	got := a.request(t, session, parts[2])
	a.settle()
	if got.info.Segments != 3 || got.info.MissingSegments != 0 {
		t.Fatalf("A after the loss: %d segments, %d missing; want 3 and 0", got.info.Segments, got.info.MissingSegments)
	}
	if notes := strings.Join(got.trace.Notes, "\n"); !strings.Contains(notes, "had lost 2 segment(s)") {
		t.Errorf("the trace does not say what was restored:\n%s", notes)
	}
	members, _ := shared.SetMembers(ctx, SessionSetKey(session))
	if len(members) != 3 {
		t.Errorf("the shared set after the restore: %v, want three keys", members)
	}
	if _, ok, _ := shared.Get(ctx, SharedKeyPrefix+first.info.Key); !ok {
		t.Error("part 1's index was not published again")
	}
	onB := b.request(t, session, "")
	if onB.info.Segments != 3 || onB.info.MissingSegments != 0 {
		t.Errorf("B after the restore: %d segments, %d missing; want 3 and 0", onB.info.Segments, onB.info.MissingSegments)
	}
	if _, ok := onB.ix.Match(packAt124, 500*time.Millisecond); !ok {
		t.Error("B's merge lacks part 1")
	}

	// Part 1 gone from every tier, A's memory included: B reports it missing.
	_ = shared.Delete(ctx, SharedKeyPrefix+first.info.Key)
	a.store.memory.Delete(first.info.Key)
	fresh := newStage(t, shared, Config{})
	lost := fresh.request(t, session, "")
	if lost.info.MissingSegments != 1 || lost.info.Segments != 2 {
		t.Errorf("with part 1 gone everywhere: %d segments, %d missing; want 2 and 1", lost.info.Segments, lost.info.MissingSegments)
	}
}

// unreadableSets is a shared cache whose session sets cannot be read while failing
// is set: as cache.Tiered with Redis down, it serves no members from a memory
// mirror that has not seen the other replicas' segments, and says so.
type unreadableSets struct {
	*cache.Memory
	failing atomic.Bool
}

func (u *unreadableSets) SetMembersConfirmed(ctx context.Context, key string) ([]string, bool, error) {
	if u.failing.Load() {
		return nil, false, nil
	}
	members, err := u.Memory.SetMembers(ctx, key)
	return members, err == nil, err
}

// TestSessionUnconfirmedWhileTheSharedCacheFails: with the session's set
// unreadable, a replica merges the segments it knows and reports the facts as
// possibly partial (Info.SessionUnconfirmed), so that validation does not judge
// another replica's segment "not in the replay". Before, replica B checked part 3
// against part 3 alone as if it were the whole session.
func TestSessionUnconfirmedWhileTheSharedCacheFails(t *testing.T) {
	t.Parallel()
	shared := &unreadableSets{Memory: newMemoryCache()}
	a, b := newStage(t, shared, Config{}), newStage(t, shared, Config{})
	const session = "c17-unreadable"
	a.request(t, session, replay(t, "allied_vs_soviet.part1.txt"))
	a.settle()
	if got := a.request(t, session, replay(t, "allied_vs_soviet.part2.txt")); got.info.SessionUnconfirmed || got.info.Segments != 2 {
		t.Fatalf("with the set readable: %+v", got.info)
	}
	a.settle()

	shared.failing.Store(true)
	onB := b.request(t, session, replay(t, "allied_vs_soviet.part3.txt"))
	if !onB.info.SessionUnconfirmed || onB.info.Segments != 1 {
		t.Errorf("B with the set unreadable: %+v; want unconfirmed, its own segment only", onB.info)
	}
	if notes := strings.Join(onB.trace.Notes, "\n"); !strings.Contains(notes, "lacks the segments other replicas added") {
		t.Errorf("the trace does not say why the facts may be partial:\n%s", notes)
	}
	onA := a.request(t, session, "")
	if !onA.info.SessionUnconfirmed || onA.info.Segments != 2 {
		t.Errorf("A with the set unreadable: %+v; want unconfirmed, the two segments it knows", onA.info)
	}

	shared.failing.Store(false)
	b.settle()
	if got := b.request(t, session, ""); got.info.SessionUnconfirmed || got.info.Segments != 3 {
		t.Errorf("B with the set readable again: %+v; want the whole session", got.info)
	}
}
