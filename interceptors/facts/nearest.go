package facts

import "time"

// Nearest is what the facts have instead of an evidence item of the kind that
// Matches does not find — for a notice or a revision request to say "the replay
// has this at that time, or for that unit". In order of preference:
//
//  1. an operation with every parameter the item cites, at another time: the one
//     closest in time (the citation's time is off);
//  2. an operation within tolerance of the cited time that has some of the
//     cited parameters: the one with the most, then the closest (the citation
//     names another unit or asset at that time);
//  3. an operation naming the cited UnitId at another time: the closest (what
//     the replay has of that kind for that unit).
//
// It reports false when none of these exists, or when Matches could not read the
// item (no evidence declared for the type, another number of parameters). It
// reads the operations of the kind within tolerance of the cited time and those
// naming the cited UnitId (else the cited asset, else the cited power; only an
// item citing none of them — a move's position — reads every operation of the
// kind). It is for the few items that fail, not for every item. The *Op is the
// caller's; its strings and Units are shared with the index.
func (k Kind) Nearest(e Evidence, tolerance time.Duration) (*Op, bool) {
	if !k.ok {
		return nil, false
	}
	ix := k.ix
	kd := &ix.schema.kinds[k.id]
	if !kd.hasEvidence || len(e.Params) != len(kd.evidence) {
		return nil, false
	}
	wants := make([]paramWant, len(e.Params))
	readable := make([]bool, len(e.Params))
	unitParam := -1
	for i, p := range e.Params {
		wants[i], readable[i] = parseParam(kd.evidence[i], trimParam(p))
		if readable[i] && unitParam < 0 && (wants[i].field == fieldUnit || wants[i].field == fieldUnits) {
			unitParam = i
		}
	}
	tolerance = max(tolerance, 0)
	n := nearest{best: -1, bestClass: noClass}
	score := func(i int32) {
		r := &ix.recs[i]
		if int(r.kind) != k.id {
			return
		}
		matched, unitMatched := 0, false
		for p := range wants {
			if readable[p] && ix.recMatches(r, wants[p:p+1]) {
				matched++
				unitMatched = unitMatched || p == unitParam
			}
		}
		diff := r.at - e.At
		if diff < 0 {
			diff = -diff
		}
		class := noClass
		switch {
		case matched == len(wants):
			class = 1
		case matched > 0 && diff <= tolerance:
			class = 2
		case unitMatched:
			class = 3
		}
		n.offer(i, class, matched, diff)
	}
	// Classes 1 and 3 need the cited UnitId (or, without one, every parameter:
	// the cited asset or power); class 2 is within tolerance of the cited time.
	list := ix.byKind[k.id]
	if unitParam >= 0 {
		list = ix.unitList(wants[unitParam].unit)
	} else {
		for p, w := range wants {
			if !readable[p] {
				list = nil // class 1 needs every parameter
				break
			}
			if w.field == fieldAsset {
				list = ix.nameList(ix.byAsset, w.text)
				break
			}
			if w.field == fieldPower {
				list = ix.nameList(ix.byPower, w.text)
				break
			}
		}
	}
	for _, i := range list {
		score(i)
	}
	all := ix.byKind[k.id]
	lo, hi := satSub(e.At, tolerance), satAdd(e.At, tolerance)
	i, j := 0, len(all)
	for i < j {
		h := int(uint(i+j) >> 1)
		if ix.recs[all[h]].at < lo {
			i = h + 1
		} else {
			j = h
		}
	}
	for ; i < len(all) && ix.recs[all[i]].at <= hi; i++ {
		score(all[i])
	}
	if n.best < 0 {
		return nil, false
	}
	return ix.opPtr(n.best), true
}

// noClass is an operation Nearest does not offer.
const noClass = 4

// nearest is the best operation Nearest has seen.
type nearest struct {
	best        int32
	bestClass   int
	bestMatched int
	bestDiff    time.Duration
}

// offer takes operation i when it is better: a lower class; in class 2 more
// matched parameters; then closer in time; then earlier (ops are indexed in time
// order), whatever order the lists offer them in.
func (n *nearest) offer(i int32, class, matched int, diff time.Duration) {
	if class == noClass || i == n.best {
		return
	}
	same := class == n.bestClass && (class != 2 || matched == n.bestMatched)
	better := n.best < 0 || class < n.bestClass ||
		class == n.bestClass && class == 2 && matched > n.bestMatched ||
		same && (diff < n.bestDiff || diff == n.bestDiff && i < n.best)
	if better {
		n.best, n.bestClass, n.bestMatched, n.bestDiff = i, class, matched, diff
	}
}
