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

func (d *decoder) string() (string, error) {
	n, err := d.count("string byte", 1)
	if err != nil {
		return "", err
	}
	return d.str(n)
}

// records decodes the records section into ix.
func (d *decoder) records(ix *Index) error {
	skipped, err := d.nonNeg("skipped records")
	if err != nil {
		return err
	}
	ix.recordsSkipped = skipped
	nsets, err := d.count("record set", 2)
	if err != nil {
		return err
	}
	sets := make([]recordSet, nsets)
	for i := range sets {
		s := &sets[i]
		if s.name, err = d.string(); err != nil {
			return err
		}
		if i > 0 && s.name <= sets[i-1].name {
			return fmt.Errorf("record set %q out of order", s.name)
		}
		n, err := d.count("record", 3)
		if err != nil {
			return err
		}
		s.recs = make([]Record, 0, n)
		s.byKey = make(map[string]int, n)
		for range n {
			r := Record{Set: s.name}
			if r.Key, err = d.string(); err != nil {
				return err
			}
			if _, dup := s.byKey[r.Key]; dup {
				return fmt.Errorf("record set %q: key %q twice", s.name, r.Key)
			}
			if r.Source, err = d.string(); err != nil {
				return err
			}
			nf, err := d.count("record field", 3)
			if err != nil {
				return err
			}
			r.fields = make([]recordField, 0, nf)
			for range nf {
				var f recordField
				if f.name, err = d.string(); err != nil {
					return err
				}
				if k := len(r.fields); k > 0 && f.name <= r.fields[k-1].name {
					return fmt.Errorf("record %q: field %q out of order", r.Key, f.name)
				}
				if f.value, err = d.fieldValue(); err != nil {
					return fmt.Errorf("record %q field %q: %w", r.Key, f.name, err)
				}
				r.fields = append(r.fields, f)
			}
			s.byKey[r.Key] = len(s.recs)
			s.recs = append(s.recs, r)
		}
	}
	ix.recordSets = sets
	return nil
}

func (d *decoder) fieldValue() (any, error) {
	tag, err := d.readByte()
	if err != nil {
		return nil, err
	}
	switch tag {
	case tagString:
		return d.string()
	case tagNumber:
		raw, err := d.str(8)
		if err != nil {
			return nil, err
		}
		return math.Float64frombits(le64(raw)), nil
	case tagInt:
		return d.varint()
	case tagBool:
		c, err := d.readByte()
		if err != nil {
			return nil, err
		}
		if c > 1 {
			return nil, fmt.Errorf("bool byte %d", c)
		}
		return c == 1, nil
	case tagDate:
		raw, err := d.string()
		if err != nil {
			return nil, err
		}
		var t time.Time
		if err := t.UnmarshalBinary([]byte(raw)); err != nil {
			return nil, err
		}
		return t, nil
	case tagStrings:
		n, err := d.count("string", 1)
		if err != nil {
			return nil, err
		}
		out := make([]string, n)
		for i := range out {
			if out[i], err = d.string(); err != nil {
				return nil, err
			}
		}
		return out, nil
	}
	return nil, fmt.Errorf("unknown field type tag %d", tag)
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
