package facts

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math"
	"slices"
	"time"
)

// The binary encoding of an index (for the shared cache). Layout, integers as
// unsigned varints unless said otherwise, "zig" = zig-zag signed varint:
//
//	magic "FGFX", format version byte
//	flags byte (1 truncated, 2 has stated duration); stated ns; lines; unparsed
//	strings: count, then each length + bytes (kind names, evidence fields,
//	  players, assets, powers; referenced by position)
//	kinds: count, then each name string, roles byte, evidence flag byte,
//	  [field count, field strings]
//	ops: count; the op texts concatenated (total length + bytes); then each op:
//	  kind, zig time delta, zig line delta, text length, player/asset/power
//	  (string position + 1, 0 = none), unit count + zig deltas, pos flag byte
//	  [+ 3 little-endian float64]
//	records (version 2; records_encode.go)
//	CRC-32C of everything before, 4 bytes little-endian
//
// The derived lookup tables are rebuilt on decode, not stored.
const (
	encodingMagic   = "FGFX"
	encodingVersion = 2 // 2: JSON records
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// MarshalBinary encodes the index compactly for the shared cache; UnmarshalIndex
// decodes it. The encoding carries a format version and a checksum. A nil index
// encodes as an empty one. The error is always nil (the method satisfies
// encoding.BinaryMarshaler).
func (ix *Index) MarshalBinary() ([]byte, error) {
	if ix == nil {
		ix = Merge()
	}
	strs := map[string]uint64{}
	var table []string
	intern := func(s string) uint64 {
		id, ok := strs[s]
		if !ok {
			id = uint64(len(table))
			strs[s] = id
			table = append(table, s)
		}
		return id
	}
	for _, k := range ix.schema.kinds {
		intern(k.name)
		for _, f := range k.evidence {
			intern(f)
		}
	}
	textLen := 0
	for i := range ix.recs {
		r := &ix.recs[i]
		textLen += int(r.text.end - r.text.start)
		for _, id := range [...]int32{r.player, r.asset, r.power} {
			if id != 0 {
				intern(ix.name(id))
			}
		}
	}

	b := make([]byte, 0, 64+textLen+len(ix.recs)*16)
	b = append(b, encodingMagic...)
	b = append(b, encodingVersion)
	var flags byte
	if ix.truncated {
		flags |= 1
	}
	if ix.hasStated {
		flags |= 2
	}
	b = append(b, flags)
	b = binary.AppendUvarint(b, uint64(ix.stated))
	b = binary.AppendUvarint(b, uint64(ix.lines))
	b = binary.AppendUvarint(b, uint64(ix.unparsed))

	b = binary.AppendUvarint(b, uint64(len(table)))
	for _, s := range table {
		b = binary.AppendUvarint(b, uint64(len(s)))
		b = append(b, s...)
	}
	b = binary.AppendUvarint(b, uint64(len(ix.schema.kinds)))
	for _, k := range ix.schema.kinds {
		b = binary.AppendUvarint(b, strs[k.name])
		b = append(b, byte(k.roles))
		if !k.hasEvidence {
			b = append(b, 0)
			continue
		}
		b = append(b, 1)
		b = binary.AppendUvarint(b, uint64(len(k.evidence)))
		for _, f := range k.evidence {
			b = binary.AppendUvarint(b, strs[f])
		}
	}

	b = binary.AppendUvarint(b, uint64(len(ix.recs)))
	b = binary.AppendUvarint(b, uint64(textLen))
	for i := range ix.recs {
		b = append(b, ix.str(ix.recs[i].text)...)
	}
	ref := func(id int32) uint64 {
		if id == 0 {
			return 0
		}
		return strs[ix.name(id)] + 1
	}
	var prevAt time.Duration
	var prevLine int32
	for i := range ix.recs {
		r := &ix.recs[i]
		b = binary.AppendUvarint(b, uint64(r.kind))
		b = binary.AppendVarint(b, int64(r.at-prevAt))
		b = binary.AppendVarint(b, int64(r.line-prevLine))
		prevAt, prevLine = r.at, r.line
		b = binary.AppendUvarint(b, uint64(r.text.end-r.text.start))
		b = binary.AppendUvarint(b, ref(r.player))
		b = binary.AppendUvarint(b, ref(r.asset))
		b = binary.AppendUvarint(b, ref(r.power))
		units := ix.recUnits(r)
		b = binary.AppendUvarint(b, uint64(len(units)))
		var prevUnit int64
		for _, u := range units {
			b = binary.AppendVarint(b, u-prevUnit)
			prevUnit = u
		}
		pos, hasPos := ix.recPos(r)
		if !hasPos {
			b = append(b, 0)
			continue
		}
		b = append(b, 1)
		for _, c := range pos {
			b = binary.LittleEndian.AppendUint64(b, math.Float64bits(c))
		}
	}
	b = ix.appendRecords(b)
	return binary.LittleEndian.AppendUint32(b, crc32.Checksum(b, castagnoli)), nil
}

// ErrCorruptIndex is wrapped by every UnmarshalIndex error about the blob's
// content (as opposed to its format version).
var ErrCorruptIndex = errors.New("corrupt fact index encoding")

// UnmarshalIndex decodes an index encoded by MarshalBinary; the result answers
// every lookup as the original did. A blob of another format version, a truncated
// or corrupt one (checksum, bounds, ids, order) is an error naming the problem and
// its byte offset — never a panic. The caller treats an error as a cache miss.
func UnmarshalIndex(data []byte) (*Index, error) {
	const minLen = len(encodingMagic) + 1 + 4
	if len(data) < minLen {
		return nil, fmt.Errorf("facts: decoding index: %d bytes, shorter than the smallest encoding: %w", len(data), ErrCorruptIndex)
	}
	if string(data[:len(encodingMagic)]) != encodingMagic {
		return nil, fmt.Errorf("facts: decoding index: bad magic %q: %w", data[:len(encodingMagic)], ErrCorruptIndex)
	}
	if v := data[len(encodingMagic)]; v != encodingVersion {
		return nil, fmt.Errorf("facts: decoding index: format version %d, want %d", v, encodingVersion)
	}
	body := data[:len(data)-4]
	if len(body) > math.MaxInt32 {
		return nil, fmt.Errorf("facts: decoding index: %d bytes, more than an index can hold: %w", len(data), ErrCorruptIndex)
	}
	if want, got := binary.LittleEndian.Uint32(data[len(data)-4:]), crc32.Checksum(body, castagnoli); want != got {
		return nil, fmt.Errorf("facts: decoding index: checksum %08x, want %08x: %w", got, want, ErrCorruptIndex)
	}
	// One copy of the whole blob; every string of the index is a piece of it.
	d := decoder{s: string(body), off: len(encodingMagic) + 1, end: len(body)}
	ix := d.index()
	if d.err != nil {
		return nil, fmt.Errorf("facts: decoding index at byte %d: %w: %w", d.off, d.err, ErrCorruptIndex)
	}
	return ix, nil
}

// decoder reads the encoding with a sticky error: the first problem is kept in
// err, and from then on every read returns a zero value without moving off (end
// becomes off), so a caller reads a whole section and checks err once. off is
// then where the first problem was found.
type decoder struct {
	s   string
	off int
	end int // reads stop here: len(s), or off once err is set
	err error
}

var errShort = errors.New("unexpected end of data")

// fail records err unless an earlier error was recorded, and stops the reads.
func (d *decoder) fail(err error) {
	if d.err == nil {
		d.err = err
		d.end = d.off
	}
}

func (d *decoder) failf(format string, args ...any) {
	if d.err == nil {
		d.fail(fmt.Errorf(format, args...))
	}
}

func (d *decoder) readByte() byte {
	if d.off >= d.end {
		d.fail(errShort)
		return 0
	}
	c := d.s[d.off]
	d.off++
	return c
}

func (d *decoder) uvarint() uint64 {
	var x uint64
	for shift := uint(0); shift < 64; shift += 7 {
		if d.off >= d.end {
			d.fail(errShort)
			return 0
		}
		c := d.s[d.off]
		d.off++
		if shift == 63 && c > 1 {
			break
		}
		x |= uint64(c&0x7f) << shift
		if c < 0x80 {
			return x
		}
	}
	d.fail(errors.New("varint overflows 64 bits"))
	return 0
}

func (d *decoder) varint() int64 {
	ux := d.uvarint()
	x := int64(ux >> 1)
	if ux&1 != 0 {
		x = ^x
	}
	return x
}

// count reads a count of items that take at least minSize bytes each, rejecting
// counts the remaining data cannot hold (no huge allocations from a corrupt blob).
func (d *decoder) count(what string, minSize int) int {
	n := d.uvarint()
	if n > uint64(d.end-d.off)/uint64(minSize) {
		d.failf("%s count %d exceeds the remaining %d bytes", what, n, d.end-d.off)
		return 0
	}
	return int(n)
}

func (d *decoder) str(n int) string {
	if n < 0 || n > d.end-d.off {
		d.fail(errShort)
		return ""
	}
	s := d.s[d.off : d.off+n]
	d.off += n
	return s
}

func (d *decoder) nonNeg(what string) int {
	v := d.uvarint()
	if v > math.MaxInt64 {
		d.failf("%s %d out of range", what, v)
		return 0
	}
	return int(v)
}

// index decodes the index after the format version; on a problem it returns nil
// with d.err set.
func (d *decoder) index() *Index {
	ix := &Index{schema: &schema{}}
	flags := d.readByte()
	if flags&^3 != 0 {
		d.failf("unknown flags %#x", flags)
	}
	ix.truncated, ix.hasStated = flags&1 != 0, flags&2 != 0
	ix.stated = time.Duration(d.nonNeg("stated duration"))
	ix.lines = d.nonNeg("line count")
	ix.unparsed = d.nonNeg("unparsed count")

	// The strings stay where they are in the blob: the index's text is the blob.
	table := make([]span, d.count("string", 1))
	for i := range table {
		l := d.nonNeg("string length")
		start := d.off
		d.str(l)
		table[i] = span{int32(start), int32(d.off)}
	}
	if d.err != nil {
		return nil
	}
	spanAt := func(id uint64, what string) (span, bool) {
		if id >= uint64(len(table)) {
			d.failf("%s string %d of %d", what, id, len(table))
			return span{}, false
		}
		return table[id], true
	}
	strAt := func(id uint64, what string) string {
		s, _ := spanAt(id, what)
		return d.s[s.start:s.end]
	}

	nk := d.count("kind", 3)
	ix.schema.kinds = make([]kindInfo, nk)
	var allRoles roleSet = 1<<len(knownRoles) - 1
	for k := range ix.schema.kinds {
		if d.err != nil {
			return nil
		}
		kd := &ix.schema.kinds[k]
		kd.name = strAt(d.uvarint(), "kind name")
		r := d.readByte()
		if kd.roles = roleSet(r); kd.roles&^allRoles != 0 {
			d.failf("kind %q: unknown roles %#x", kd.name, r)
		}
		has := d.readByte()
		if has > 1 {
			d.failf("kind %q: evidence flag %d", kd.name, has)
		}
		if has != 1 {
			continue
		}
		kd.hasEvidence = true
		kd.evidence = make([]string, d.count("evidence field", 1))
		for f := range kd.evidence {
			kd.evidence[f] = strAt(d.uvarint(), "evidence field")
			if !slices.Contains(knownGroups, kd.evidence[f]) || kd.evidence[f] == fieldTime {
				d.failf("kind %q: unknown evidence field %q", kd.name, kd.evidence[f])
			}
		}
	}
	if d.err != nil {
		return nil
	}
	ix.schema.finish()
	if len(ix.schema.byFold) != len(ix.schema.kinds) {
		d.fail(errors.New("duplicate kind names"))
	}

	nops := d.count("op", 8)
	textLen := d.nonNeg("text length")
	textsStart := d.off
	texts := d.str(textLen)
	ix.recs = make([]opRec, nops)
	var units []int64
	textOff := 0
	var at time.Duration
	line := 0
	// Names get ids in order of first reference; an empty string is no name, and
	// a string the table holds twice is one name.
	ix.names = []string{""}
	nameOf := make([]int32, len(table)) // table index -> name id + 1 (0: none yet)
	nameIDs := map[string]int32{}
	ref := func(what string) int32 {
		id := d.uvarint()
		if id == 0 {
			return 0
		}
		sp, ok := spanAt(id-1, what)
		if !ok {
			return 0
		}
		if n := nameOf[id-1]; n != 0 {
			return n - 1
		}
		v := d.s[sp.start:sp.end]
		n, ok := nameIDs[v]
		if !ok && v != "" {
			n = int32(len(ix.names))
			ix.names = append(ix.names, v)
			nameIDs[v] = n
		}
		nameOf[id-1] = n + 1
		return n
	}
	for i := range ix.recs {
		if d.err != nil {
			return nil
		}
		op := &ix.recs[i]
		kind := d.uvarint()
		if kind >= uint64(nk) {
			d.failf("op %d: kind %d of %d", i, kind, nk)
		}
		op.kind = int32(kind)
		dAt := d.varint()
		if dAt < 0 || time.Duration(dAt) > math.MaxInt64-at {
			d.failf("op %d: time out of order", i)
		}
		at += time.Duration(dAt)
		op.at = at
		if line += int(d.varint()); line < 0 || line > math.MaxInt32 {
			d.failf("op %d: line %d out of range", i, line)
		}
		op.line = int32(line)
		tl := d.nonNeg("op text length")
		if tl > len(texts)-textOff {
			d.failf("op %d: text length %d beyond the texts", i, tl)
			tl = 0
		}
		op.text = span{int32(textsStart + textOff), int32(textsStart + textOff + tl)}
		textOff += tl
		op.player = ref("player")
		op.asset = ref("asset")
		op.power = ref("power")
		nu := d.count("unit", 1)
		op.unitsStart = int32(len(units))
		var u int64
		for range nu {
			u += d.varint()
			units = append(units, u)
		}
		op.unitsEnd = int32(len(units))
		switch hasPos := d.readByte(); hasPos {
		case 0:
		case 1:
			raw := d.str(24)
			if len(raw) < 24 {
				break
			}
			var pos [3]float64
			for c := range 3 {
				pos[c] = math.Float64frombits(le64(raw[8*c : 8*c+8]))
			}
			ix.pos = append(ix.pos, pos)
			op.pos = int32(len(ix.pos))
		default:
			d.failf("op %d: position flag %d", i, hasPos)
		}
	}
	if d.err != nil {
		return nil
	}
	if textOff != len(texts) {
		d.failf("%d bytes of op text unused", len(texts)-textOff)
		return nil
	}
	if d.records(ix); d.err != nil {
		d.err = fmt.Errorf("records: %w", d.err)
		return nil
	}
	if d.off != len(d.s) {
		d.failf("%d trailing bytes", len(d.s)-d.off)
		return nil
	}
	ix.text, ix.units = d.s, units
	ix.derive()
	return ix
}

// le64 reads a little-endian uint64 from the first 8 bytes of s.
func le64(s string) uint64 {
	_ = s[7]
	return uint64(s[0]) | uint64(s[1])<<8 | uint64(s[2])<<16 | uint64(s[3])<<24 |
		uint64(s[4])<<32 | uint64(s[5])<<40 | uint64(s[6])<<48 | uint64(s[7])<<56
}
