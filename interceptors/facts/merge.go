package facts

import (
	"slices"
	"time"
)

// Merge joins the indexes of one session's segments, given in the order they were
// sent, into one index that answers for the whole session:
//   - the operations of all segments, ordered by time (segment order, then line
//     order, among equal times); Op.Line counts lines over the segments taken as
//     one text;
//   - duplicates removed: an operation with the same time and line text as one of
//     an earlier segment (overlapping segments) is kept only once — as many copies
//     as the segment repeating it most often holds;
//   - the stated duration is the longest stated, so End is the latest over the
//     segments; Truncated if any segment was; Lines and Unparsed add up.
//
// Indexes built with different rules merge by kind name (roles combine; the first
// index that declares evidence for a kind decides its parameters). nil indexes are
// skipped; merging nothing gives an empty index. Merge of one index returns it.
func Merge(indexes ...*Index) *Index {
	var segs []*Index
	for _, ix := range indexes {
		if ix != nil {
			segs = append(segs, ix)
		}
	}
	switch len(segs) {
	case 0:
		out := &Index{schema: &schema{}}
		out.schema.finish()
		out.derive()
		return out
	case 1:
		return segs[0]
	}

	sc := &schema{}
	byName := map[string]int{}
	remap := make([][]int32, len(segs))
	total := 0
	for s, ix := range segs {
		total += len(ix.ops)
		remap[s] = make([]int32, len(ix.schema.kinds))
		for k, kd := range ix.schema.kinds {
			id, ok := byName[kd.name]
			if !ok {
				id = len(sc.kinds)
				byName[kd.name] = id
				sc.kinds = append(sc.kinds, kindInfo{name: kd.name})
			}
			sc.kinds[id].roles |= kd.roles
			if kd.hasEvidence && !sc.kinds[id].hasEvidence {
				sc.kinds[id].evidence, sc.kinds[id].hasEvidence = kd.evidence, true
			}
			remap[s][k] = int32(id)
		}
	}
	sc.finish()

	out := &Index{schema: sc, ops: make([]Op, 0, total)}
	type opKey struct {
		at   time.Duration
		text string
	}
	kept := make(map[opKey]int, total)
	lineOffset := 0
	for s, ix := range segs {
		seen := make(map[opKey]int, len(ix.ops))
		for _, op := range ix.ops {
			key := opKey{op.At, op.Text}
			seen[key]++
			if seen[key] <= kept[key] {
				continue
			}
			kept[key]++
			op.kind = remap[s][op.kind]
			op.Line += lineOffset
			out.ops = append(out.ops, op)
		}
		lineOffset += ix.lines
		out.lines += ix.lines
		out.unparsed += ix.unparsed
		out.truncated = out.truncated || ix.truncated
		if ix.hasStated && (!out.hasStated || ix.stated > out.stated) {
			out.stated, out.hasStated = ix.stated, true
		}
	}
	slices.SortStableFunc(out.ops, cmpOpTime)
	out.derive()
	return out
}
