package facts

import (
	"math"
	"slices"
	"strings"
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
	textLen := 0
	for s, ix := range segs {
		total += len(ix.recs)
		textLen += len(ix.text)
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

	// The merged index has a text of its own: the kept operations' lines, then
	// its names, each once.
	out := &Index{schema: sc, recs: make([]opRec, 0, total), names: []string{""}}
	var text strings.Builder
	text.Grow(min(textLen, math.MaxInt32))
	nameIDs := map[string]int32{}
	nameBytes := 0
	name := func(ix *Index, id int32) int32 {
		if id == 0 {
			return 0
		}
		v := ix.name(id)
		n, ok := nameIDs[v]
		if !ok {
			n = int32(len(out.names))
			out.names = append(out.names, v)
			nameIDs[v] = n
			nameBytes += len(v)
		}
		return n
	}
	type opKey struct {
		at   time.Duration
		text string
	}
	kept := make(map[opKey]int, total)
	lineOffset := 0
	for s, ix := range segs {
		seen := make(map[opKey]int, len(ix.recs))
		for i := range ix.recs {
			r := ix.recs[i]
			line := ix.str(r.text)
			key := opKey{r.at, line}
			seen[key]++
			if seen[key] <= kept[key] {
				continue
			}
			if text.Len() > math.MaxInt32-len(line)-nameBytes-3*maxNameBytes {
				out.truncated = true // past what one index can address: never for real logs
				break
			}
			kept[key]++
			r.kind = remap[s][r.kind]
			r.line += int32(lineOffset)
			start := int32(text.Len())
			text.WriteString(line)
			r.text = span{start, start + int32(len(line))}
			r.player = name(ix, r.player)
			r.asset = name(ix, r.asset)
			r.power = name(ix, r.power)
			if p, ok := ix.recPos(&ix.recs[i]); ok {
				out.pos = append(out.pos, p)
				r.pos = int32(len(out.pos))
			}
			units := ix.recUnits(&ix.recs[i])
			r.unitsStart = int32(len(out.units))
			out.units = append(out.units, units...)
			r.unitsEnd = int32(len(out.units))
			out.recs = append(out.recs, r)
		}
		lineOffset += ix.lines
		out.lines += ix.lines
		out.unparsed += ix.unparsed
		out.truncated = out.truncated || ix.truncated
		if ix.hasStated && (!out.hasStated || ix.stated > out.stated) {
			out.stated, out.hasStated = ix.stated, true
		}
	}
	nameSpans := make([]span, len(out.names))
	for i, v := range out.names {
		start := int32(text.Len())
		text.WriteString(v)
		nameSpans[i] = span{start, int32(text.Len())}
	}
	out.text = text.String()
	for i, sp := range nameSpans {
		out.names[i] = out.text[sp.start:sp.end]
	}
	slices.SortStableFunc(out.recs, cmpOpTime)
	out.mergeRecords(segs)
	out.derive()
	return out
}

// mergeRecords joins the segments' record sets: a key a later segment has
// again replaces the earlier record (the latest state), in first-seen order.
func (out *Index) mergeRecords(segs []*Index) {
	var sets []recordSet
	for _, ix := range segs {
		out.recordsSkipped += ix.recordsSkipped
		for i := range ix.recordSets {
			src := &ix.recordSets[i]
			j := slices.IndexFunc(sets, func(s recordSet) bool { return s.name == src.name })
			if j < 0 {
				sets = append(sets, recordSet{name: src.name})
				j = len(sets) - 1
			}
			for _, r := range src.recs {
				sets[j].add(r)
			}
		}
	}
	if len(sets) > 0 {
		out.setRecordSets(sets)
	}
}

// maxNameBytes bounds a player, asset or power name: they are parts of one line,
// and a line is at most MaxLineBytes.
const maxNameBytes = MaxLineBytes
