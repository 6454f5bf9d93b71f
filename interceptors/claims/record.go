package claims

import (
	"strconv"
	"strings"
	"time"

	"github.com/factgate/factgate/interceptors"
	"github.com/factgate/factgate/knowledge"
)

// Record is one claim of a declared kind (knowledge.ClaimKind), read generically:
// every pack's claims are in Claims.Records, in the block's kind order (the
// order pack.yaml declares the kinds in), each kind's claims in array order.
//
// Field returns a declared field's value by the field's type:
//
//	string    string (trimmed, never blank)
//	int, id   int64
//	number    float64
//	bool      bool
//	date      time.Time
//	clock     time.Duration
//	level     string (the canonical English level, "highly likely"; also in Level)
//	evidence  []Evidence (also in Evidence)
//	strings   []string (at least one item)
//
// ok is false when the field is not declared, absent, or not convertible (which
// the parser reported as an issue where the kind requires the field). A field a
// kind accepts under an alias (claims.field_alias) has the alias's value.
type Record struct {
	// Kind is the claim kind: the claims array's key ("orderClaims").
	Kind string
	// Path locates the claim: "orderClaims[2]".
	Path string
	// LevelRaw is the level as written ("" when absent).
	LevelRaw string
	// Evidence is the evidence field's items, parsed as the ra3 evidence is
	// (nil for a kind without an evidence field).
	Evidence []Evidence
	// Index is the claim's index in its JSON array.
	Index int
	// Level is the evidence level; Uncertain when LevelKnown is false (and for a
	// kind without a level field).
	Level Level
	// LevelKnown reports that LevelRaw is a known spelling.
	LevelKnown bool

	// One of the three holds the fields: a generic read's values, or the typed
	// claim ra3's fast path read (a Record is kept small: ra3 fills one per claim
	// on every Parse).
	gen   *genericValues
	unit  *UnitClaim
	claim *Claim
}

// genericValues are a generically read claim's declared fields.
type genericValues struct {
	spec *kindSpec
	vals []fieldValue // by slot
}

// fieldValue is one declared field's value in a generically read Record.
type fieldValue struct {
	v   any    // the converted value; nil when absent or not convertible
	raw string // a string's value, or another value's JSON text; "" when absent
}

// Field returns a declared field's value (see Record).
func (r *Record) Field(name string) (any, bool) {
	var v any
	ok := false
	switch {
	case r.unit != nil:
		v, ok = r.unit.field(name)
	case r.claim != nil:
		v, ok = r.claim.field(name)
	case r.gen != nil:
		i, ok := r.gen.spec.shape.slot[name]
		if !ok || r.gen.vals[i].v == nil {
			return nil, false
		}
		return r.gen.vals[i].v, true
	}
	if !ok {
		return nil, false
	}
	return v, true
}

// Declares returns the type of a field the record's kind declares ("" when it
// declares none of that name).
func (r *Record) Declares(name string) knowledge.FieldType {
	spec := r.spec()
	if spec == nil {
		return ""
	}
	if i, ok := spec.shape.slot[name]; ok {
		return spec.fields[i].typ
	}
	return ""
}

// HasLevel reports that the record's kind has a level field.
func (r *Record) HasLevel() bool {
	if spec := r.spec(); spec != nil {
		return spec.level >= 0
	}
	return false
}

// FieldText returns a declared field as text: a converted value formatted
// (an int in decimal, a level canonical, a list joined with ", "), else the field
// as written (a string's value or the JSON text), else "". It is what a missing
// field's issue arguments carry.
func (r *Record) FieldText(name string) string {
	if v, ok := r.Field(name); ok {
		return formatValue(v)
	}
	if r.gen != nil {
		if i, ok := r.gen.spec.shape.slot[name]; ok {
			return r.gen.vals[i].raw
		}
	}
	switch {
	case r.unit != nil && name == "unitId":
		return r.unit.UnitIDRaw
	case r.unit != nil && name == "evidenceLevel", r.claim != nil && name == "evidenceLevel":
		return r.LevelRaw
	}
	return ""
}

// field is a unit claim's field by ra3's declaration.
func (u *UnitClaim) field(name string) (any, bool) {
	switch name {
	case "unitId":
		return u.UnitID, u.HasUnitID
	case "player":
		return u.Player, u.Player != ""
	case "claim":
		return u.Claim, u.Claim != ""
	case "evidenceLevel":
		return u.Level.String(), u.LevelKnown
	case "evidence":
		return u.Evidence, len(u.Evidence) > 0
	case "alternatives":
		return u.Alternatives, len(u.Alternatives) > 0
	case "needsConfirmation":
		return u.NeedsConfirmation, len(u.NeedsConfirmation) > 0
	}
	return nil, false
}

// field is an event or timeline claim's field by ra3's declaration.
func (c *Claim) field(name string) (any, bool) {
	switch name {
	case "claim":
		return c.Claim, c.Claim != ""
	case "evidenceLevel":
		return c.Level.String(), c.LevelKnown
	case "evidence":
		return c.Evidence, len(c.Evidence) > 0
	case "needsConfirmation":
		return c.NeedsConfirmation, len(c.NeedsConfirmation) > 0
	}
	return nil, false
}

// kindShape is a declared kind as the generic reader uses it.
type kindShape struct {
	slot map[string]int // field name -> index in genericValues.vals
}

// recordsFromTyped returns the records of ra3's typed claims, appended to buf.
func (c *Claims) recordsFromTyped(buf []Record) []Record {
	for i := range c.UnitClaims {
		u := &c.UnitClaims[i]
		buf = append(buf, Record{Kind: UnitClaimsField, Index: i, Path: u.Path, Level: u.Level, LevelRaw: u.LevelRaw,
			LevelKnown: u.LevelKnown, Evidence: u.Evidence, unit: u})
	}
	for _, k := range [...]struct {
		kind string
		list []Claim
	}{{EventClaimsField, c.EventClaims}, {TimelineClaimsField, c.TimelineClaims}} {
		for i := range k.list {
			cl := &k.list[i]
			buf = append(buf, Record{Kind: k.kind, Index: i, Path: cl.Path, Level: cl.Level, LevelRaw: cl.LevelRaw,
				LevelKnown: cl.LevelKnown, Evidence: cl.Evidence, claim: cl})
		}
	}
	return buf
}

// formatValue renders a field value as FieldText does.
func formatValue(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case int64:
		return formatInt(x)
	case float64:
		return formatFloat(x)
	case bool:
		if x {
			return "true"
		}
		return "false"
	case time.Time:
		if x.Hour() == 0 && x.Minute() == 0 && x.Second() == 0 && x.Nanosecond() == 0 && x.Location() == time.UTC {
			return x.Format(time.DateOnly)
		}
		return x.Format(time.RFC3339Nano)
	case time.Duration:
		return formatClock(x)
	case []string:
		return joinComma(x)
	case []Evidence:
		out := make([]string, len(x))
		for i, e := range x {
			out[i] = e.Raw
		}
		return joinComma(out)
	}
	return ""
}

func formatInt(n int64) string { return strconv.FormatInt(n, 10) }

func formatFloat(f float64) string { return strconv.FormatFloat(f, 'g', -1, 64) }

func formatClock(d time.Duration) string { return interceptors.FormatClock(d) }

func joinComma(list []string) string { return strings.Join(list, ", ") }

// spec returns the declaration of the record's kind (the seed's for a claim of
// ra3's typed reader), or nil.
func (r *Record) spec() *kindSpec {
	if r.gen != nil {
		return r.gen.spec
	}
	for _, k := range seedSpecs {
		if k.name == r.Kind {
			return k
		}
	}
	return nil
}
