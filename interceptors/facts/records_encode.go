package facts

import (
	"encoding/binary"
	"fmt"
	"math"
	"time"
)

// The records section of the index encoding (format version 2), after the ops:
//
//	skipped count; set count; each set: name string, record count; each record:
//	  key, source (strings), field count; each field: name string, type tag
//	  byte, value — string: string; number: 8 bytes little-endian float64;
//	  int: zig; bool: byte; date: time.Time.MarshalBinary as a string;
//	  strings: count + strings
//
// Strings are a length and the bytes.
const (
	tagString byte = iota + 1
	tagNumber
	tagInt
	tagBool
	tagDate
	tagStrings
)

func appendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

// appendRecords appends the records section of ix.
func (ix *Index) appendRecords(b []byte) []byte {
	b = binary.AppendUvarint(b, uint64(ix.recordsSkipped))
	b = binary.AppendUvarint(b, uint64(len(ix.recordSets)))
	for i := range ix.recordSets {
		s := &ix.recordSets[i]
		b = appendString(b, s.name)
		b = binary.AppendUvarint(b, uint64(len(s.recs)))
		for _, r := range s.recs {
			b = appendString(b, r.Key)
			b = appendString(b, r.Source)
			b = binary.AppendUvarint(b, uint64(len(r.fields)))
			for _, f := range r.fields {
				b = appendString(b, f.name)
				switch v := f.value.(type) {
				case string:
					b = append(b, tagString)
					b = appendString(b, v)
				case float64:
					b = append(b, tagNumber)
					b = binary.LittleEndian.AppendUint64(b, math.Float64bits(v))
				case int64:
					b = append(b, tagInt)
					b = binary.AppendVarint(b, v)
				case bool:
					b = append(b, tagBool)
					if v {
						b = append(b, 1)
					} else {
						b = append(b, 0)
					}
				case time.Time:
					t, _ := v.MarshalBinary()
					b = append(b, tagDate)
					b = appendString(b, string(t))
				case []string:
					b = append(b, tagStrings)
					b = binary.AppendUvarint(b, uint64(len(v)))
					for _, s := range v {
						b = appendString(b, s)
					}
				default:
					panic(fmt.Sprintf("facts: record field %s holds a %T", f.name, v))
				}
			}
		}
	}
	return b
}

func (d *decoder) string() string {
	return d.str(d.count("string byte", 1))
}

// records decodes the records section into ix; on a problem d.err is set and
// ix's records are left unset.
func (d *decoder) records(ix *Index) {
	ix.recordsSkipped = d.nonNeg("skipped records")
	sets := make([]recordSet, d.count("record set", 2))
	for i := range sets {
		if d.err != nil {
			return
		}
		s := &sets[i]
		s.name = d.string()
		if i > 0 && s.name <= sets[i-1].name {
			d.failf("record set %q out of order", s.name)
		}
		n := d.count("record", 3)
		s.recs = make([]Record, 0, n)
		s.byKey = make(map[string]int, n)
		for range n {
			r := Record{Set: s.name}
			r.Key = d.string()
			if _, dup := s.byKey[r.Key]; dup {
				d.failf("record set %q: key %q twice", s.name, r.Key)
			}
			r.Source = d.string()
			nf := d.count("record field", 3)
			r.fields = make([]recordField, 0, nf)
			for range nf {
				var f recordField
				f.name = d.string()
				if k := len(r.fields); k > 0 && f.name <= r.fields[k-1].name {
					d.failf("record %q: field %q out of order", r.Key, f.name)
				}
				if d.err != nil {
					return
				}
				if f.value = d.fieldValue(); d.err != nil {
					d.err = fmt.Errorf("record %q field %q: %w", r.Key, f.name, d.err)
					return
				}
				r.fields = append(r.fields, f)
			}
			if d.err != nil {
				return
			}
			s.byKey[r.Key] = len(s.recs)
			s.recs = append(s.recs, r)
		}
	}
	if d.err == nil {
		ix.recordSets = sets
	}
}

// fieldValue reads one tagged field value; on a problem it returns nil with
// d.err set.
func (d *decoder) fieldValue() any {
	switch tag := d.readByte(); tag {
	case tagString:
		return d.string()
	case tagNumber:
		raw := d.str(8)
		if len(raw) < 8 {
			return nil
		}
		return math.Float64frombits(le64(raw))
	case tagInt:
		return d.varint()
	case tagBool:
		c := d.readByte()
		if c > 1 {
			d.failf("bool byte %d", c)
		}
		return c == 1
	case tagDate:
		raw := d.string()
		var t time.Time
		if d.err == nil {
			if err := t.UnmarshalBinary([]byte(raw)); err != nil {
				d.fail(err)
			}
		}
		return t
	case tagStrings:
		out := make([]string, d.count("string", 1))
		for i := range out {
			out[i] = d.string()
		}
		return out
	default:
		d.failf("unknown field type tag %d", tag)
		return nil
	}
}

// recordsHeapBytes estimates the heap the records of ix hold.
func recordsHeapBytes(ix *Index) int64 {
	var n int64
	for i := range ix.recordSets {
		for _, r := range ix.recordSets[i].recs {
			n += 96 + int64(len(r.Key)+len(r.Source)) + int64(cap(r.fields))*32
			for _, f := range r.fields {
				switch v := f.value.(type) {
				case string:
					n += int64(len(v)) + 16
				case []string:
					for _, s := range v {
						n += int64(len(s)) + 16
					}
				default:
					n += 16
				}
			}
		}
	}
	return n
}
