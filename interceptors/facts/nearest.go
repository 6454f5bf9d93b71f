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
// reads every operation of the kind, so it is for the few items that fail, not
// for every item. The *Op is the caller's; its strings and Units are shared with
// the index.
func (k Kind) Nearest(e Evidence, tolerance time.Duration) (*Op, bool) {
	if !k.ok {
		return nil, false
	}
	ix := k.ix
	kd := &ix.schema.kinds[k.id]
	if !kd.hasEvidence || len(e.Params) != len(kd.evidence) {
		return nil, false
	}
	wants := make([]paramWant, 0, len(e.Params))
	readable := make([]bool, 0, len(e.Params))
	unitParam := -1
	for i, p := range e.Params {
		w, ok := parseParam(kd.evidence[i], trimParam(p))
		wants = append(wants, w)
		readable = append(readable, ok)
		if ok && unitParam < 0 && (w.field == fieldUnit || w.field == fieldUnits) {
			unitParam = i
		}
	}
	tolerance = max(tolerance, 0)
	best, bestClass, bestMatched := int32(-1), 4, 0
	var bestDiff time.Duration
	for _, i := range ix.byKind[k.id] {
		r := &ix.recs[i]
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
		class := 4
		switch {
		case matched == len(wants):
			class = 1
		case matched > 0 && diff <= tolerance:
			class = 2
		case unitMatched:
			class = 3
		}
		if class == 4 {
			continue
		}
		better := class < bestClass ||
			class == bestClass && class == 2 && matched > bestMatched ||
			class == bestClass && (class != 2 || matched == bestMatched) && diff < bestDiff
		if best < 0 || better {
			best, bestClass, bestMatched, bestDiff = i, class, matched, diff
		}
	}
	if best < 0 {
		return nil, false
	}
	return ix.opPtr(best), true
}
