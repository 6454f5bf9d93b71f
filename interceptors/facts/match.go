package facts

import (
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Evidence is one structured evidence item ("type|time|p1|p2...") as a validator
// hands it to Match. The claims parser has its own type; the validator converts.
type Evidence struct {
	// Type is the evidence type, compared with operation kinds in any case.
	Type string
	// At is the cited time.
	At time.Duration
	// Params are the parameters after the time, compared in order with the op
	// fields the rules' Evidence declares for Type.
	Params []string
}

// PosEpsilon is how far apart two position coordinates may be and still be the
// same position: positions compare as numbers ("1204.5,880,12" equals
// "1204.50,880.0,12.0"), and the log writes one decimal.
const PosEpsilon = 1e-3

// paramWant is one parsed evidence parameter.
type paramWant struct {
	field string
	text  string
	unit  int64
	pos   [3]float64
}

// Match finds the operation an evidence item cites, for evidence.not_in_replay.
// An operation matches when its kind equals e.Type (any case), its time differs
// from e.At by at most tolerance (inclusive; a negative tolerance is zero), and
// every parameter equals the op field the rules' Evidence names for it:
// UnitIds as integers (an operation naming several units — a selection — matches
// any of them), positions as numbers within PosEpsilon, names exactly (white space
// around a parameter is ignored). When several operations match, the one closest in
// time is returned (the earliest among equally close ones).
//
// It reports false when nothing matches, when the rules declare no evidence for the
// type, or when the number of parameters differs from the declared one. The *Op is
// the caller's; its strings and Units are shared with the index.
func (ix *Index) Match(e Evidence, tolerance time.Duration) (*Op, bool) {
	i := ix.matchAt(e, tolerance)
	if i < 0 {
		return nil, false
	}
	return ix.opPtr(i), true
}

// Matches reports whether Match finds an operation, without making the *Op: what
// the validator asks of every evidence item.
func (ix *Index) Matches(e Evidence, tolerance time.Duration) bool {
	return ix.matchAt(e, tolerance) >= 0
}

// matchAt returns the index of the operation Match returns, -1 for none.
func (ix *Index) matchAt(e Evidence, tolerance time.Duration) int32 {
	if ix == nil {
		return -1
	}
	id, ok := ix.schema.kindID(e.Type)
	if !ok {
		return -1
	}
	return ix.matchKind(id, e, tolerance)
}

// matchKind is matchAt for evidence of the kind with id (e.Type is not read).
func (ix *Index) matchKind(id int, e Evidence, tolerance time.Duration) int32 {
	k := &ix.schema.kinds[id]
	if !k.hasEvidence || len(e.Params) != len(k.evidence) {
		return -1
	}
	var buf [6]paramWant
	wants := buf[:0]
	for i, p := range e.Params {
		w, ok := parseParam(k.evidence[i], trimParam(p))
		if !ok {
			return -1
		}
		wants = append(wants, w)
	}
	tolerance = max(tolerance, 0)
	lo, hi := satSub(e.At, tolerance), satAdd(e.At, tolerance)

	list := ix.byKind[id]
	// First op at or after lo (binary search by hand: no closure on the hot path).
	i, j := 0, len(list)
	for i < j {
		h := int(uint(i+j) >> 1)
		if ix.recs[list[h]].at < lo {
			i = h + 1
		} else {
			j = h
		}
	}
	best := int32(-1)
	var bestDiff time.Duration
	for ; i < len(list); i++ {
		r := &ix.recs[list[i]]
		if r.at > hi {
			break
		}
		if !ix.recMatches(r, wants) {
			continue
		}
		diff := r.at - e.At
		if diff < 0 {
			diff = -diff
		}
		if best < 0 || diff < bestDiff {
			best, bestDiff = list[i], diff
		}
		if r.at >= e.At {
			break // later matches are farther away
		}
	}
	return best
}

// trimParam is strings.TrimSpace without the call for a parameter that neither
// starts nor ends with space, as the claims parser hands them over: TrimSpace
// removes only ASCII white space and Unicode spaces (whose UTF-8 bytes are all >=
// 0x80), so a text whose first and last bytes are printable ASCII other than the
// space is returned as it is.
func trimParam(p string) string {
	if p != "" && asciiGraphic(p[0]) && asciiGraphic(p[len(p)-1]) {
		return p
	}
	return strings.TrimSpace(p)
}

func asciiGraphic(c byte) bool { return '!' <= c && c <= '~' }

// ParseUnitID reads a UnitId parameter as strconv.ParseInt(s, 10, 64) does,
// reporting false where it fails; the 1 to 18 digits of nearly every UnitId,
// which no int64 overflows, are read without its call.
func ParseUnitID(s string) (int64, bool) {
	if len(s) == 0 || len(s) > 18 {
		return parseUnitIDSlow(s)
	}
	var n int64
	for i := 0; i < len(s); i++ {
		c := s[i] - '0'
		if c > 9 {
			return parseUnitIDSlow(s)
		}
		n = n*10 + int64(c)
	}
	return n, true
}

func parseUnitIDSlow(s string) (int64, bool) {
	n, err := strconv.ParseInt(s, 10, 64)
	return n, err == nil
}

func parseParam(field, p string) (paramWant, bool) {
	w := paramWant{field: field, text: p}
	switch field {
	case fieldUnit, fieldUnits:
		u, ok := ParseUnitID(p)
		if !ok {
			return w, false
		}
		w.unit = u
	case fieldPos:
		pos, ok := parsePos(p)
		if !ok {
			return w, false
		}
		w.pos = pos
	}
	return w, true
}

func (ix *Index) recMatches(r *opRec, wants []paramWant) bool {
	for i := range wants {
		w := &wants[i]
		switch w.field {
		case fieldUnit, fieldUnits:
			if !slices.Contains(ix.recUnits(r), w.unit) {
				return false
			}
		case fieldPos:
			pos, ok := ix.recPos(r)
			if !ok {
				return false
			}
			for c := range 3 {
				if math.Abs(pos[c]-w.pos[c]) > PosEpsilon {
					return false
				}
			}
		case fieldPlayer:
			if ix.name(r.player) != w.text {
				return false
			}
		case fieldAsset:
			if ix.name(r.asset) != w.text {
				return false
			}
		case fieldPower:
			if ix.name(r.power) != w.text {
				return false
			}
		default:
			return false
		}
	}
	return true
}

func satSub(a, b time.Duration) time.Duration {
	if a < math.MinInt64+b {
		return math.MinInt64
	}
	return a - b
}

func satAdd(a, b time.Duration) time.Duration {
	if a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}
