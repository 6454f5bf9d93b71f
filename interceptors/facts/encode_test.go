package facts

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"slices"
	"testing"
	"time"
)

// sameAnswers fails when b answers any lookup differently from a, over every unit,
// player and (player, asset) of a and a sample of citations.
func sameAnswers(t *testing.T, a, b *Index) {
	t.Helper()
	if !slices.EqualFunc(a.Ops(), b.Ops(), opsEqual) {
		t.Fatalf("operations differ (%d vs %d)", a.Len(), b.Len())
	}
	as, aok := a.StatedDuration()
	bs, bok := b.StatedDuration()
	if as != bs || aok != bok || a.End() != b.End() || a.Lines() != b.Lines() || a.Unparsed() != b.Unparsed() || a.Truncated() != b.Truncated() {
		t.Errorf("metadata differs: stated %v/%v %v/%v end %v/%v lines %d/%d unparsed %d/%d truncated %v/%v",
			as, bs, aok, bok, a.End(), b.End(), a.Lines(), b.Lines(), a.Unparsed(), b.Unparsed(), a.Truncated(), b.Truncated())
	}
	if !slices.Equal(a.Players(), b.Players()) || !slices.Equal(a.Units(), b.Units()) {
		t.Errorf("players %q/%q or units differ", a.Players(), b.Players())
	}
	for _, u := range a.Units() {
		af, _ := a.FirstObserved(u)
		bf, _ := b.FirstObserved(u)
		al, _ := a.LastObserved(u)
		bl, _ := b.LastObserved(u)
		if af != bf || al != bl || !slices.Equal(a.UnitPlayers(u), b.UnitPlayers(u)) || !slices.Equal(a.UnitPowers(u), b.UnitPowers(u)) {
			t.Errorf("unit %d: observed %v-%v vs %v-%v, players %q vs %q", u, af, al, bf, bl, a.UnitPlayers(u), b.UnitPlayers(u))
		}
		for _, role := range knownRoles {
			if len(a.UnitOps(u, role)) != len(b.UnitOps(u, role)) || a.ActedAs(u, role) != b.ActedAs(u, role) {
				t.Errorf("unit %d role %s differs", u, role)
			}
		}
	}
	for _, p := range a.Players() {
		for _, op := range a.PlayerOps(p, RoleProducer) {
			at, aok := a.FirstProduction(p, op.Asset)
			bt, bok := b.FirstProduction(p, op.Asset)
			if at != bt || aok != bok {
				t.Errorf("FirstProduction(%s, %s) = %v vs %v", p, op.Asset, at, bt)
			}
		}
		for _, role := range append(knownRoles[:], "") {
			if len(a.PlayerOps(p, role)) != len(b.PlayerOps(p, role)) {
				t.Errorf("player %s role %q differs", p, role)
			}
		}
	}
	for i, op := range a.Ops() {
		if i%7 != 0 {
			continue
		}
		e, ok := evidenceFor(a, &op)
		if !ok {
			continue
		}
		ao, aok := a.Match(e, 0)
		bo, bok := b.Match(e, 0)
		if aok != bok || !aok || ao.Text != bo.Text {
			t.Errorf("Match(%v): %v vs %v", e, aok, bok)
		}
	}
}

// evidenceFor writes the evidence item that cites op, from the index's evidence
// declaration.
func evidenceFor(ix *Index, op *Op) (Evidence, bool) {
	fields, ok := ix.EvidenceFields(op.Kind)
	if !ok {
		return Evidence{}, false
	}
	e := Evidence{Type: op.Kind, At: op.At}
	for _, f := range fields {
		switch f {
		case fieldUnit, fieldUnits:
			if len(op.Units) == 0 {
				return Evidence{}, false // only a hand-made (fuzzed) index has such an op
			}
			e.Params = append(e.Params, itoa(op.Units[len(op.Units)-1]))
		case fieldAsset:
			e.Params = append(e.Params, op.Asset)
		case fieldPower:
			e.Params = append(e.Params, op.Power)
		case fieldPlayer:
			e.Params = append(e.Params, op.Player)
		case fieldPos:
			e.Params = append(e.Params, ftoa(op.Pos[0])+","+ftoa(op.Pos[1])+","+ftoa(op.Pos[2]))
		}
	}
	return e, true
}

func TestEncodeRoundTrip(t *testing.T) {
	t.Parallel()
	for _, name := range replayNames {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ix := extractReplay(t, name)
			blob, err := ix.MarshalBinary()
			if err != nil {
				t.Fatal(err)
			}
			back, err := UnmarshalIndex(blob)
			if err != nil {
				t.Fatal(err)
			}
			sameAnswers(t, ix, back)
			again, _ := back.MarshalBinary()
			if !bytes.Equal(blob, again) {
				t.Error("re-encoding the decoded index changes the bytes")
			}
			if ix.Len() > 1000 && len(blob) > len(replay(t, name))*2 {
				t.Errorf("encoding is %d bytes for a %d-byte log", len(blob), len(replay(t, name)))
			}
		})
	}
}

func TestEncodeSpecialIndexes(t *testing.T) {
	t.Parallel()
	truncating, err := NewExtractor(loadRules(t), WithMaxBytes(200))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		ix   *Index
	}{
		{"empty", extract(t, "")},
		{"prose only", extract(t, "hello\nworld")},
		{"merged session", Merge(extractReplay(t, "allied_vs_soviet.part1.txt"), extractReplay(t, "allied_vs_soviet.part2.txt"))},
		{"merged nothing", Merge()},
		{"truncated with unparsed", must(truncating.Extract("1:99.00 A 出售 [UnitId]1\n录像时长: 1:00.00\n0:01.00 A 出售 [UnitId]2\n" + replay(t, "mcv_vs_miner.txt")))},
		{"negative units and positions", extract(t, "0:01.00 A 选择 [UnitId]9 [UnitId]3 [UnitId]9223372036854775807\n0:02.00 A 移动 @ (-1.5,-0.25,1e3)")},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			blob, _ := tc.ix.MarshalBinary()
			back, err := UnmarshalIndex(blob)
			if err != nil {
				t.Fatal(err)
			}
			sameAnswers(t, tc.ix, back)
		})
	}
	var nilIndex *Index
	blob, _ := nilIndex.MarshalBinary()
	if back, err := UnmarshalIndex(blob); err != nil || back.HasFacts() {
		t.Errorf("nil index round trip: %v, %v", back, err)
	}
}

// TestDecodeCorrupt cuts and flips an encoding everywhere: every damaged blob is
// an error, never a panic, and never a different index.
func TestDecodeCorrupt(t *testing.T) {
	t.Parallel()
	blob, _ := extractReplay(t, "mcv_vs_miner.txt").MarshalBinary()
	for n := range len(blob) {
		if _, err := UnmarshalIndex(blob[:n]); err == nil {
			t.Fatalf("blob truncated to %d of %d bytes decoded", n, len(blob))
		}
	}
	for i := range blob {
		for _, bit := range []byte{0x01, 0x80} {
			bad := slices.Clone(blob)
			bad[i] ^= bit
			if _, err := UnmarshalIndex(bad); err == nil {
				t.Fatalf("flipping bit %#x of byte %d decoded", bit, i)
			}
		}
	}
	if _, err := UnmarshalIndex(append(slices.Clone(blob), 0)); err == nil {
		t.Error("a trailing byte decoded")
	}

	other := slices.Clone(blob)
	other[len(encodingMagic)] = encodingVersion + 1
	other = resum(other[:len(other)-4])
	_, err := UnmarshalIndex(other)
	if err == nil || errors.Is(err, ErrCorruptIndex) {
		t.Errorf("another format version: %v; want a version error that is not ErrCorruptIndex", err)
	}
}

// TestDecodeTruncatedStructure cuts an encoding's body at every byte and gives
// each cut a valid checksum, so that the structure decoder (not the checksum)
// meets the end of the data: every cut is an ErrCorruptIndex error, never a panic.
func TestDecodeTruncatedStructure(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"mcv_vs_miner.txt", "allied_vs_soviet.part3.txt"} {
		blob, _ := extractReplay(t, name).MarshalBinary()
		body := blob[:len(blob)-4]
		for n := len(encodingMagic) + 1; n < len(body); n++ {
			_, err := UnmarshalIndex(resum(slices.Clone(body[:n])))
			if err == nil || !errors.Is(err, ErrCorruptIndex) {
				t.Fatalf("%s: body cut to %d of %d bytes: %v; want an ErrCorruptIndex error", name, n, len(body), err)
			}
		}
	}
}

// resum appends a valid checksum to body.
func resum(body []byte) []byte {
	return binary.LittleEndian.AppendUint32(body, crc32.Checksum(body, castagnoli))
}

// FuzzUnmarshalIndex feeds arbitrary blobs, both as given and with a valid checksum
// appended (to get past the checksum into the structure): decoding must never
// panic, and whatever decodes must re-encode and decode to the same answers.
func FuzzUnmarshalIndex(f *testing.F) {
	for _, name := range []string{"mcv_vs_miner.txt", "allied_vs_soviet.part3.txt"} {
		blob, _ := extractReplay(f, name).MarshalBinary()
		f.Add(blob)
		f.Add(blob[:len(blob)-4])
	}
	f.Add([]byte("FGFX\x01"))
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, blob := range [][]byte{data, resum(slices.Clone(data))} {
			ix, err := UnmarshalIndex(blob)
			if err != nil {
				continue
			}
			again, _ := ix.MarshalBinary()
			back, err := UnmarshalIndex(again)
			if err != nil {
				t.Fatalf("re-encoded index does not decode: %v", err)
			}
			if back.Len() != ix.Len() || back.End() != ix.End() {
				t.Fatalf("re-decoded index differs")
			}
			for _, u := range ix.Units() {
				ix.FirstObserved(u)
				ix.UnitPlayers(u)
			}
			ix.Relevant(ix.Units(), nil, nil, 5)
			for _, op := range ix.Ops() {
				if e, ok := evidenceFor(ix, &op); ok {
					ix.Match(e, time.Second)
				}
			}
		}
	})
}
