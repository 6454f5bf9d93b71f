package claims

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/factgate/factgate/interceptors"
	"github.com/factgate/factgate/knowledge"
)

// The generic reader reads any declared claim kind (knowledge.ClaimKind) into
// Claims.Records, with the tolerance of the ra3 reader it generalises: the same
// walk over the block, the first occurrence of a key counting, a lone string for
// a list, a non-object item kept as an empty claim, the caps, the levels and the
// evidence parser. ra3's kinds (the seed's shape) keep the typed reader as their
// fast path; record_diff_test.go shows both read every ra3 answer alike.

// CodeMissingField is the issue of a required field a claim lacks (or holds in a
// form its type does not read), unless the kind maps the field to a code of its
// own.
const CodeMissingField = "claims.missing_field"

// The field names the revision's edits know (Edit): a kind that declares them
// with these types gets alternatives, a corrected player and what would confirm
// the claim added by the downgrade.
const (
	FieldAlternatives      = "alternatives"
	FieldNeedsConfirmation = "needsConfirmation"
	FieldPlayer            = "player"
)

// declares reports a field of that name and type.
func (k *kindSpec) declares(name string, t knowledge.FieldType) bool {
	i, ok := k.shape.slot[name]
	return ok && k.fields[i].typ == t
}

// lacks says that the kind does not declare a field; seed says it as the seed's
// reader did ("only unit claims have alternatives").
func (k *kindSpec) lacks(field, seed string) string {
	if _, ok := kindOf(k.name); ok && seed != "" {
		return seed
	}
	return fmt.Sprintf("%s declares no %s", k.name, field)
}

// seedSpecs are the seed's kinds (ra3's), for Claims read without a declaration.
var seedSpecs = func() []*kindSpec {
	kinds := knowledge.DefaultClaimKinds(nil)
	out := make([]*kindSpec, len(kinds))
	for i := range kinds {
		out[i] = newKindSpec(&kinds[i])
	}
	return out
}()

// kindSpec returns the declared kind named name (the seed's kinds when c was
// not read by a Parser), or nil.
func (c *Claims) kindSpec(name string) *kindSpec {
	kinds := c.kinds
	if kinds == nil {
		kinds = seedSpecs
	}
	for _, k := range kinds {
		if k.name == name {
			return k
		}
	}
	return nil
}

// firstKind names a declared kind, for messages.
func (c *Claims) firstKind() string {
	if len(c.kinds) > 0 {
		return c.kinds[0].name
	}
	return UnitClaimsField
}

// levelValues are the canonical level names as Field returns them, boxed once.
var levelValues = func() (out [len(levelNames)]any) {
	for l, name := range levelNames {
		out[l] = name
	}
	return out
}()

// kindSpec is one declared kind as the generic reader uses it.
type kindSpec struct {
	name     string
	cap      int
	fields   []fieldSpec       // in declaration order; the index is the field's slot
	keys     map[string]keyRef // every JSON key read: the fields' and their aliases'
	nkeys    int
	shape    *kindShape
	level    int // the level field's slot, -1 when none
	evidence int // the evidence field's slot, -1 when none
	claim    int // the slot of a field named "claim", -1 when none
	required []int
	codes    map[int]*knowledge.MissingCode // by slot
	paths    []string                       // the claim paths below maxPathClaims
	evPaths  [][]string                     // their evidence items' paths below maxPathEvidence
}

type fieldSpec struct {
	name    string
	typ     knowledge.FieldType
	key     int      // the key index of the field's own name
	aliases []string // in declaration order
	akeys   []int    // their key indexes
}

// keyRef says which field a JSON key fills, and which key it is.
type keyRef struct {
	slot, key int
}

func newKindSpec(k *knowledge.ClaimKind) *kindSpec {
	ks := &kindSpec{name: k.Name, cap: k.Cap, keys: map[string]keyRef{}, level: -1, evidence: -1, claim: -1,
		shape: &kindShape{slot: map[string]int{}}, codes: map[int]*knowledge.MissingCode{}}
	if ks.cap <= 0 {
		ks.cap = knowledge.DefaultClaimKindCap
	}
	for i, name := range k.FieldOrder {
		f := fieldSpec{name: name, typ: k.Fields[name], key: ks.nkeys}
		ks.keys[name] = keyRef{i, ks.nkeys}
		ks.nkeys++
		ks.shape.slot[name] = i
		switch {
		case f.typ == knowledge.FieldLevel && ks.level < 0:
			ks.level = i
		case f.typ == knowledge.FieldEvidence && ks.evidence < 0:
			ks.evidence = i
		}
		if name == "claim" {
			ks.claim = i
		}
		ks.fields = append(ks.fields, f)
	}
	for _, name := range k.AliasOrder {
		i, ok := ks.shape.slot[name]
		if !ok {
			continue
		}
		for _, a := range k.Aliases[name] {
			if _, dup := ks.keys[a]; dup {
				continue
			}
			ks.keys[a] = keyRef{i, ks.nkeys}
			ks.fields[i].aliases = append(ks.fields[i].aliases, a)
			ks.fields[i].akeys = append(ks.fields[i].akeys, ks.nkeys)
			ks.nkeys++
		}
	}
	for i := range min(ks.cap, maxPathClaims) {
		ks.paths = append(ks.paths, ks.name+"["+strconv.Itoa(i)+"]")
		if ks.evidence >= 0 {
			ev := make([]string, maxPathEvidence)
			for j := range ev {
				ev[j] = ks.paths[i] + "." + ks.fields[ks.evidence].name + "[" + strconv.Itoa(j) + "]"
			}
			ks.evPaths = append(ks.evPaths, ev)
		}
	}
	for _, name := range k.Required {
		if i, ok := ks.shape.slot[name]; ok {
			ks.required = append(ks.required, i)
			if mc, ok := k.Codes[name]; ok {
				ks.codes[i] = &mc
			}
		}
	}
	return ks
}

// isSeedShape reports kinds that are exactly the seed's unitClaims, eventClaims
// and timelineClaims (any caps): the typed reader reads them.
func isSeedShape(kinds knowledge.ClaimKinds) bool {
	want := knowledge.DefaultClaimKinds(nil)
	if len(kinds) != len(want) {
		return false
	}
	for i := range kinds {
		k, w := &kinds[i], &want[i]
		if k.Name != w.Name || !slices.Equal(k.FieldOrder, w.FieldOrder) || !slices.Equal(k.Required, w.Required) ||
			!slices.Equal(k.AliasOrder, w.AliasOrder) || len(k.Codes) != len(w.Codes) {
			return false
		}
		for f, t := range w.Fields {
			if k.Fields[f] != t {
				return false
			}
		}
		for f, a := range w.Aliases {
			if !slices.Equal(k.Aliases[f], a) {
				return false
			}
		}
		for f, c := range w.Codes {
			kc, ok := k.Codes[f]
			if !ok || kc.Code != c.Code || !slices.Equal(kc.ArgOrder, c.ArgOrder) {
				return false
			}
			for a, v := range c.Args {
				if kc.Args[a] != v {
					return false
				}
			}
		}
	}
	return true
}

// genericClaim is one claim's values as the walk met them, by key.
type genericClaim struct {
	raw  []value
	met  []bool
	ev   [][]Evidence
	strs [][]string
}

// reset makes g hold n keys, none met.
func (g *genericClaim) reset(n int) {
	if cap(g.raw) < n {
		g.raw, g.met, g.ev, g.strs = make([]value, n), make([]bool, n), make([][]Evidence, n), make([][]string, n)
	}
	g.raw, g.met, g.ev, g.strs = g.raw[:n], g.met[:n], g.ev[:n], g.strs[:n]
	clear(g.raw)
	clear(g.met)
	clear(g.ev)
	clear(g.strs)
}

// readGeneric is read for the declared kinds (see read): it reads c.JSON into
// c.Records and reports false, leaving c as it was, when c.JSON is not valid JSON.
func (p *Parser) readGeneric(c *Claims, st *parseState, root int) bool {
	s := c.JSON
	issues := c.Issues
	seen := make([]bool, len(p.kinds))
	type run struct{ kind, issues, records int }
	var runs []run
	var records []Record
	end := st.w.Members(root, func(key string, v int) int {
		ki := p.kindIndex(key)
		if ki < 0 || seen[ki] {
			return -1
		}
		seen[ki] = true
		if s[v] != '[' {
			return -1 // the first occurrence counts even when it is not an array
		}
		runs = append(runs, run{ki, len(c.Issues), len(records)})
		spec := p.kinds[ki]
		count := 0
		end := st.w.Elements(v, func(at int) int {
			i := count
			count++
			if i >= spec.cap {
				return -1
			}
			records = append(records, Record{})
			return st.genericClaim(&records[len(records)-1], spec, i, at)
		})
		if count > spec.cap {
			c.Issues = append(c.Issues, issue(CodeTruncated, interceptors.Info, spec.name,
				fmt.Sprintf("%s has %d claims; only the first %d are kept", spec.name, count, spec.cap),
				"list", spec.name, "count", strconv.Itoa(count), "cap", strconv.Itoa(spec.cap)))
		}
		return end
	})
	if !st.w.End(end) {
		c.Issues = issues
		return false
	}
	c.Valid = true
	if !slices.IsSortedFunc(runs, func(a, b run) int { return a.kind - b.kind }) {
		// Report the kinds' issues and records in declaration order.
		order := slices.Clone(runs)
		slices.SortStableFunc(order, func(a, b run) int { return a.kind - b.kind })
		bounds := func(k int, issuesEnd, recordsEnd int) (int, int) {
			if k+1 < len(runs) {
				return runs[k+1].issues, runs[k+1].records
			}
			return issuesEnd, recordsEnd
		}
		outIssues := slices.Clone(c.Issues[:runs[0].issues])
		outRecords := make([]Record, 0, len(records))
		for _, r := range order {
			k := slices.Index(runs, r)
			ie, re := bounds(k, len(c.Issues), len(records))
			outIssues = append(outIssues, c.Issues[r.issues:ie]...)
			outRecords = append(outRecords, records[r.records:re]...)
		}
		c.Issues, records = outIssues, outRecords
	}
	if len(records) > 0 {
		c.Records = records
	}
	return true
}

// kindIndex returns the index of the declared kind named key, or -1.
func (p *Parser) kindIndex(key string) int {
	for i, k := range p.kinds {
		if k.name == key {
			return i
		}
	}
	return -1
}

// genericClaim reads claim i of a kind at c.JSON[at] into *r and returns the
// offset just past it (-1 for a value that is not an object: an empty claim).
func (st *parseState) genericClaim(r *Record, spec *kindSpec, i, at int) int {
	s := st.c.JSON
	r.Kind, r.Index = spec.name, i
	if i < len(spec.paths) {
		r.Path = spec.paths[i]
	} else {
		r.Path = spec.name + "[" + strconv.Itoa(i) + "]"
	}
	own := len(st.c.Issues) // the claim's alias and level issues precede its evidence's
	// The values met are kept only while the claim is read: one buffer serves
	// every claim of the read.
	g := &st.generic
	g.reset(spec.nkeys)
	end := -1
	if s[at] == '{' {
		end = st.w.Members(at, func(key string, v int) int {
			ref, ok := spec.keys[key]
			if !ok || g.met[ref.key] {
				return -1
			}
			g.met[ref.key] = true
			switch spec.fields[ref.slot].typ {
			case knowledge.FieldEvidence:
				var end int
				g.ev[ref.key], end = st.evidenceItems(spec, i, r.Path+"."+key, v)
				return end
			case knowledge.FieldStrings:
				var end int
				g.strs[ref.key], end = st.stringList(v)
				return end
			}
			var end int
			g.raw[ref.key], end = readValue(&st.w, s, v)
			return end
		})
	}
	vals := make([]fieldValue, len(spec.fields))
	r.gen = &genericValues{spec: spec, vals: vals}
	for slot := range spec.fields {
		f := &spec.fields[slot]
		fv, ok := g.field(f, f.key)
		if !ok && slot != spec.level {
			for j, ak := range f.akeys {
				if av, ok := g.field(f, ak); ok {
					fv = av
					st.insertIssue(&own, issue(CodeFieldAlias, interceptors.Info, r.Path,
						fmt.Sprintf("the %s claim uses %q instead of %q", spec.name, f.aliases[j], f.name),
						"alias", f.aliases[j], "field", f.name))
					break
				}
			}
		}
		vals[slot] = fv
	}
	if spec.level >= 0 {
		f := &spec.fields[spec.level]
		v := g.raw[f.key]
		for _, ak := range f.akeys {
			if v.exists() {
				break
			}
			v = g.raw[ak]
		}
		r.Level, r.LevelRaw, r.LevelKnown = st.level(&own, r.Path, v)
		if r.LevelKnown {
			vals[spec.level].v = levelValues[r.Level]
		} else {
			vals[spec.level].raw = r.LevelRaw
		}
	}
	if spec.evidence >= 0 {
		if list, ok := vals[spec.evidence].v.([]Evidence); ok {
			r.Evidence = list
		}
	}
	for _, slot := range spec.required {
		if vals[slot].v != nil {
			continue
		}
		f := &spec.fields[slot]
		if mc := spec.codes[slot]; mc != nil {
			args := make([]string, 0, 2*len(mc.ArgOrder))
			for _, a := range mc.ArgOrder {
				args = append(args, a, r.FieldText(mc.Args[a]))
			}
			st.c.Issues = append(st.c.Issues, issue(mc.Code, interceptors.Warning, r.Path, missingMessage(spec.name, f.name, vals[slot].raw), args...))
			continue
		}
		claim := ""
		if spec.claim >= 0 {
			claim = r.FieldText("claim")
		}
		st.c.Issues = append(st.c.Issues, issue(CodeMissingField, interceptors.Warning, r.Path, missingMessage(spec.name, f.name, vals[slot].raw),
			"kind", spec.name, "field", f.name, "claim", claim))
	}
	return end
}

func missingMessage(kind, field, raw string) string {
	if raw != "" {
		return fmt.Sprintf("the %s claim's %s %q is not usable", kind, field, raw)
	}
	return fmt.Sprintf("the %s claim has no %s", kind, field)
}

// field converts the value read for key (the field's own or an alias) by the
// field's type. raw is kept for a present value a non-string field does not
// read, for the issue arguments (FieldText).
func (g *genericClaim) field(f *fieldSpec, key int) (fieldValue, bool) {
	switch f.typ {
	case knowledge.FieldEvidence:
		if len(g.ev[key]) > 0 {
			return fieldValue{v: g.ev[key]}, true
		}
		return fieldValue{}, false
	case knowledge.FieldStrings:
		if len(g.strs[key]) > 0 {
			return fieldValue{v: g.strs[key]}, true
		}
		return fieldValue{}, false
	case knowledge.FieldLevel:
		return fieldValue{}, false // read by level
	}
	v := g.raw[key]
	if !v.exists() {
		return fieldValue{}, false
	}
	if x, ok := convert(f.typ, v); ok {
		return fieldValue{v: x}, true
	}
	if f.typ == knowledge.FieldString {
		return fieldValue{}, false
	}
	return fieldValue{raw: v.rawText()}, false
}

// convert reads v by a scalar type (see knowledge.FieldType).
func convert(t knowledge.FieldType, v value) (any, bool) {
	switch t {
	case knowledge.FieldString:
		if s := trimSpace(v.text()); s != "" {
			return s, true
		}
	case knowledge.FieldID:
		if n, ok := unitID(v); ok {
			return n, true
		}
	case knowledge.FieldInt:
		if n, ok := wholeNumber(v); ok {
			return n, true
		}
	case knowledge.FieldNumber:
		text := v.raw
		if v.isString() {
			text = trimSpace(v.str)
		} else if !v.isNumber() {
			return nil, false
		}
		if f, err := strconv.ParseFloat(text, 64); err == nil && !math.IsInf(f, 0) && !math.IsNaN(f) {
			return f, true
		}
	case knowledge.FieldBool:
		text := v.raw
		if v.isString() {
			text = strings.ToLower(trimSpace(v.str))
		}
		switch text {
		case "true":
			return true, true
		case "false":
			return false, true
		}
	case knowledge.FieldDate:
		if v.isString() {
			if d, ok := parseDate(trimSpace(v.str)); ok {
				return d, true
			}
		}
	case knowledge.FieldClock:
		if v.isString() {
			if d, ok := interceptors.ParseClock(trimSpace(v.str)); ok {
				return d, true
			}
		} else if v.isNumber() {
			if f, err := strconv.ParseFloat(v.raw, 64); err == nil && f >= 0 && f < 1e9 {
				return time.Duration(f * float64(time.Second)), true
			}
		}
	}
	return nil, false
}

// wholeNumber reads an int field: an integer, a number without a fraction, or a
// string of digits with an optional sign.
func wholeNumber(v value) (int64, bool) {
	text := v.raw
	if v.isString() {
		text = trimSpace(v.str)
	} else if !v.isNumber() {
		return 0, false
	}
	if n, err := strconv.ParseInt(strings.TrimPrefix(text, "+"), 10, 64); err == nil {
		return n, true
	}
	if v.isString() {
		return 0, false
	}
	f, err := strconv.ParseFloat(text, 64)
	if err == nil && f > -(1<<53) && f < 1<<53 && f == math.Trunc(f) {
		return int64(f), true
	}
	return 0, false
}

// dateLayouts are the ISO 8601 forms a date field reads.
var dateLayouts = []string{time.RFC3339Nano, "2006-01-02T15:04:05", "2006-01-02T15:04", "2006-01-02 15:04:05", "2006-01-02 15:04", time.DateOnly}

// parseDate reads an ISO 8601 date or date-time; one without a zone is UTC.
func parseDate(s string) (time.Time, bool) {
	for _, layout := range dateLayouts {
		if t, err := time.Parse(layout, s); err == nil {
			return t, true
		}
	}
	return time.Time{}, false
}

// evidenceItems reads the evidence list of claim i of spec at c.JSON[at] (an
// array, or a lone string as one item) whose items' paths are prefix[j]: a list
// of its own, and the offset just past it; nil and -1 for another value.
func (st *parseState) evidenceItems(spec *kindSpec, i int, prefix string, at int) ([]Evidence, int) {
	s := st.c.JSON
	var list []Evidence
	add := func(v int) int {
		var path string
		if j := len(list); i < len(spec.evPaths) && j < maxPathEvidence {
			path = spec.evPaths[i][j]
		} else {
			path = prefix + "[" + strconv.Itoa(j) + "]"
		}
		var ev Evidence
		var err error
		var end int
		isString := s[v] == '"'
		if isString {
			var text string
			if text, end = st.w.String(v); end < 0 {
				return -1
			}
			ev, err = st.p.parseEvidence(text, st.strArena())
		} else {
			if end = st.w.Value(v); end < 0 {
				return -1
			}
			ev = Evidence{Raw: s[v:end]}
			err = fmt.Errorf("the item is a JSON %s, not a string", jsonType(ev.Raw))
		}
		ev.Path = path
		list = append(list, ev)
		if err != nil && (len(st.p.evidence) > 0 || !isString) {
			st.c.Issues = append(st.c.Issues, issue(CodeEvidenceUnstructured, interceptors.Info, path,
				fmt.Sprintf("evidence %q is not structured evidence: %v", ev.Raw, err),
				"evidence", ev.Raw, "reason", err.Error()))
		}
		return end
	}
	switch s[at] {
	case '"':
		return list, add(at)
	case '[':
		end := st.w.Elements(at, add)
		return list, end
	}
	return nil, -1
}
