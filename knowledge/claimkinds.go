package knowledge

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"go.yaml.in/yaml/v3"

	"github.com/factgate/factgate/knowledge/rawjson"
)

// FieldType is the type of a declared claim field: how the tolerant parser reads
// the field's JSON value and what Record.Field returns for it.
type FieldType string

// The claim field types.
const (
	// FieldString is a JSON string, trimmed; a blank string counts as absent.
	FieldString FieldType = "string"
	// FieldInt is a whole number: a JSON integer, a number with no fraction, or a
	// string of decimal digits with an optional sign (int64).
	FieldInt FieldType = "int"
	// FieldID is an identifier: a non-negative whole number written as a number or
	// as a string of decimal digits (int64). ra3's unitId.
	FieldID FieldType = "id"
	// FieldNumber is a JSON number or a string holding one (float64).
	FieldNumber FieldType = "number"
	// FieldBool is true or false, or the strings "true"/"false" in any case (bool).
	FieldBool FieldType = "bool"
	// FieldDate is an ISO 8601 date ("2026-03-01") or date-time (RFC 3339)
	// (time.Time).
	FieldDate FieldType = "date"
	// FieldClock is a game-clock or wall-clock duration ("1:24", "1:24.00",
	// "h:mm:ss") (time.Duration).
	FieldClock FieldType = "clock"
	// FieldLevel is the claim's evidence level, read with the pack's levels. A kind
	// has at most one; Record.Level holds it.
	FieldLevel FieldType = "level"
	// FieldEvidence is the claim's evidence list: strings in the pack's
	// facts.evidence formats ("type|time|p1|p2..."). A kind has at most one;
	// Record.Evidence holds it.
	FieldEvidence FieldType = "evidence"
	// FieldStrings is a list of strings (a lone string counts as one item; blank
	// and non-string items are skipped) ([]string).
	FieldStrings FieldType = "strings"
)

// FieldTypes lists every claim field type, in the order the docs give them.
var FieldTypes = []FieldType{FieldString, FieldInt, FieldID, FieldNumber, FieldBool, FieldDate, FieldClock, FieldLevel, FieldEvidence, FieldStrings}

// Known reports a type the parser reads.
func (t FieldType) Known() bool { return slices.Contains(FieldTypes, t) }

// Position is where a key or value is in a YAML file (1-based; 0 when unknown).
type Position struct {
	Line, Column int
}

// String renders "line:column".
func (p Position) String() string { return strconv.Itoa(p.Line) + ":" + strconv.Itoa(p.Column) }

// MissingCode is the issue a kind reports for one missing required field instead
// of claims.missing_field: its code and its arguments, each an argument name ->
// the declared field whose value it carries (the value as read, or the field's
// text as written when it does not convert; "" when absent).
//
// In pack.yaml a code is written as a bare string (unitId: unit.missing_id), whose
// arguments are those of claims.missing_field (kind, field, claim), or as a
// mapping {code: unit.missing_id, args: {unit: unitId, claim: claim}}.
type MissingCode struct {
	Code string
	Args map[string]string
	// ArgOrder is the keys of Args in the order pack.yaml lists them.
	ArgOrder []string
}

// ClaimKind is one declared claim kind: a claims array of the block and the
// shape of its items. The declaration is pack.yaml's claims.kinds.<name>:
//
//	orderClaims:
//	  cap: 5
//	  fields: {order: string, claim: string, evidenceLevel: level, evidence: evidence}
//	  required: [order, claim]
//	  codes: {order: order.missing_id}
//	  aliases: {claim: [event]}
type ClaimKind struct {
	// Name is the claims array's key in the block ("unitClaims").
	Name string
	// Cap keeps the first Cap items of the array (claims.truncated for more);
	// 0 in pack.yaml means the default, 10.
	Cap int
	// Fields are the declared fields: name -> type.
	Fields map[string]FieldType
	// FieldOrder lists the keys of Fields in the order pack.yaml lists them.
	FieldOrder []string
	// Required are the fields a claim must carry (a usable value of their type);
	// a missing one is claims.missing_field unless Codes maps it.
	Required []string
	// Codes maps a required field to the pack's own issue for its absence.
	Codes map[string]MissingCode
	// Aliases are other keys accepted for a field (field -> aliases): used when
	// the field itself is absent or unusable, with an Info claims.field_alias.
	Aliases map[string][]string
	// AliasOrder lists the keys of Aliases in pack.yaml's order.
	AliasOrder []string

	// Pos is where the kind's name is in pack.yaml; FieldPos where each field
	// name is, and KeyPos where each of the kind's own keys (cap, fields,
	// required, codes, aliases) and each required/code/alias entry is
	// ("required[1]", "codes.unitId", "aliases.claim").
	Pos      Position
	FieldPos map[string]Position
	KeyPos   map[string]Position

	problems []claimKindProblem // shape problems met while decoding
}

type claimKindProblem struct {
	pos  Position
	path string
	msg  string
}

// DefaultClaimKindCap is the cap of a kind that declares none.
const DefaultClaimKindCap = 10

// LevelField returns the name of the kind's level field ("" when it has none).
func (k *ClaimKind) LevelField() string { return k.fieldOfType(FieldLevel) }

// EvidenceField returns the name of the kind's evidence field ("" when none).
func (k *ClaimKind) EvidenceField() string { return k.fieldOfType(FieldEvidence) }

func (k *ClaimKind) fieldOfType(t FieldType) string {
	for _, f := range k.FieldOrder {
		if k.Fields[f] == t {
			return f
		}
	}
	return ""
}

// Has reports a declared field of that type.
func (k *ClaimKind) Has(field string, t FieldType) bool { return k.Fields[field] == t }

// ClaimKinds are a pack's declared claim kinds in pack.yaml's order, which is the
// order the claims arrays' issues are reported in.
type ClaimKinds []ClaimKind

// Kind returns the kind with that name.
func (ks ClaimKinds) Kind(name string) (*ClaimKind, bool) {
	for i := range ks {
		if ks[i].Name == name {
			return &ks[i], true
		}
	}
	return nil, false
}

// Names returns the kinds' names in order.
func (ks ClaimKinds) Names() []string {
	out := make([]string, len(ks))
	for i := range ks {
		out[i] = ks[i].Name
	}
	return out
}

// The claim kinds of a contract that declares none: the shape of seed 001 (the
// ra3 pack's, which declares the same kinds explicitly).
const (
	DefaultUnitClaimsCap     = 10
	DefaultEventClaimsCap    = 5
	DefaultTimelineClaimsCap = 3
)

// DefaultClaimKinds returns the kinds of a claims contract without kinds: the
// seed's unitClaims, eventClaims and timelineClaims, with caps (the old
// claims.caps; nil or a missing or zero cap means the default 10/5/3).
func DefaultClaimKinds(caps map[string]int) ClaimKinds {
	capOf := func(name string, def int) int {
		if n := caps[name]; n > 0 {
			return n
		}
		return def
	}
	mk := func(name string, c int, fields [][2]string) ClaimKind {
		k := ClaimKind{Name: name, Cap: c, Fields: map[string]FieldType{}}
		for _, f := range fields {
			k.Fields[f[0]] = FieldType(f[1])
			k.FieldOrder = append(k.FieldOrder, f[0])
		}
		return k
	}
	unit := mk("unitClaims", capOf("unitClaims", DefaultUnitClaimsCap), [][2]string{
		{"unitId", "id"}, {"player", "string"}, {"claim", "string"}, {"evidenceLevel", "level"},
		{"evidence", "evidence"}, {"alternatives", "strings"}, {"needsConfirmation", "strings"}})
	unit.Required = []string{"unitId", "claim"}
	unit.Codes = map[string]MissingCode{
		"unitId": {Code: "unit.missing_id", Args: map[string]string{"unit": "unitId", "claim": "claim"}, ArgOrder: []string{"unit", "claim"}},
		"claim":  {Code: "unit.missing_claim", Args: map[string]string{"unit": "unitId"}, ArgOrder: []string{"unit"}},
	}
	short := [][2]string{{"claim", "string"}, {"evidenceLevel", "level"}, {"evidence", "evidence"}, {"needsConfirmation", "strings"}}
	event := mk("eventClaims", capOf("eventClaims", DefaultEventClaimsCap), short)
	event.Aliases = map[string][]string{"claim": {"event"}}
	event.AliasOrder = []string{"claim"}
	timeline := mk("timelineClaims", capOf("timelineClaims", DefaultTimelineClaimsCap), short)
	return ClaimKinds{unit, event, timeline}
}

// ClaimKinds returns the contract's claim kinds: the declared ones, or without
// claims.kinds the defaults (DefaultClaimKinds with claims.caps). A nil contract
// has the defaults.
func (c *ClaimsContract) ClaimKinds() ClaimKinds {
	if c == nil {
		return DefaultClaimKinds(nil)
	}
	if len(c.Kinds) > 0 {
		return c.Kinds
	}
	return DefaultClaimKinds(c.Caps)
}

// UnmarshalYAML reads claims.kinds: a mapping of kind name -> declaration, in
// order, remembering where each key is. Shape problems (an unknown key, a value
// of the wrong YAML kind) do not fail the decode: they are kept and reported by
// the pack loader with their line and column, with the rest of the pack's
// problems.
func (ks *ClaimKinds) UnmarshalYAML(n *yaml.Node) error {
	n = resolve(n)
	if n.Kind == yaml.ScalarNode && n.Tag == "!!null" {
		*ks = nil
		return nil
	}
	if n.Kind != yaml.MappingNode {
		*ks = ClaimKinds{{problems: []claimKindProblem{{pos(n), "claims.kinds", "want a mapping of claim kind name -> declaration, got " + nodeWord(n)}}}}
		return nil
	}
	out := make(ClaimKinds, 0, len(n.Content)/2)
	for i := 0; i+1 < len(n.Content); i += 2 {
		out = append(out, decodeClaimKind(n.Content[i], resolve(n.Content[i+1])))
	}
	*ks = out
	return nil
}

func decodeClaimKind(key, v *yaml.Node) ClaimKind {
	k := ClaimKind{Name: key.Value, Pos: pos(key), Fields: map[string]FieldType{}, FieldPos: map[string]Position{}, KeyPos: map[string]Position{}}
	base := "claims.kinds." + k.Name
	bad := func(n *yaml.Node, path, format string, args ...any) {
		k.problems = append(k.problems, claimKindProblem{pos(n), path, fmt.Sprintf(format, args...)})
	}
	if v.Kind == yaml.ScalarNode && v.Tag == "!!null" {
		return k
	}
	if v.Kind != yaml.MappingNode {
		bad(v, base, "want a mapping (cap, fields, required, codes, aliases), got %s", nodeWord(v))
		return k
	}
	for i := 0; i+1 < len(v.Content); i += 2 {
		kn, vn := v.Content[i], resolve(v.Content[i+1])
		path := base + "." + kn.Value
		k.KeyPos[kn.Value] = pos(kn)
		switch kn.Value {
		case "cap":
			n, err := strconv.Atoi(vn.Value)
			if vn.Kind != yaml.ScalarNode || err != nil {
				bad(vn, path, "want a whole number, got %s", nodeWord(vn))
				continue
			}
			k.Cap = n
			k.KeyPos["cap"] = pos(vn)
		case "fields":
			if !isMap(vn) {
				bad(vn, path, "want a mapping of field name -> type, got %s", nodeWord(vn))
				continue
			}
			for j := 0; j+1 < len(vn.Content); j += 2 {
				fk, fv := vn.Content[j], resolve(vn.Content[j+1])
				if _, dup := k.Fields[fk.Value]; dup {
					bad(fk, path+"."+fk.Value, "field declared twice")
					continue
				}
				if fv.Kind != yaml.ScalarNode {
					bad(fv, path+"."+fk.Value, "want a type name, got %s", nodeWord(fv))
					continue
				}
				k.Fields[fk.Value] = FieldType(fv.Value)
				k.FieldOrder = append(k.FieldOrder, fk.Value)
				k.FieldPos[fk.Value] = pos(fk)
				k.KeyPos["fields."+fk.Value] = pos(fv)
			}
		case "required":
			items, ok := scalarList(vn)
			if !ok {
				bad(vn, path, "want a list of field names, got %s", nodeWord(vn))
				continue
			}
			for j, it := range items {
				k.Required = append(k.Required, it.Value)
				k.KeyPos["required["+strconv.Itoa(j)+"]"] = pos(it)
			}
		case "codes":
			if !isMap(vn) {
				bad(vn, path, "want a mapping of required field -> issue code, got %s", nodeWord(vn))
				continue
			}
			k.Codes = map[string]MissingCode{}
			for j := 0; j+1 < len(vn.Content); j += 2 {
				ck, cv := vn.Content[j], resolve(vn.Content[j+1])
				cpath := path + "." + ck.Value
				k.KeyPos["codes."+ck.Value] = pos(ck)
				mc, ok := decodeMissingCode(cv, cpath, &k, bad)
				if ok {
					k.Codes[ck.Value] = mc
				}
			}
		case "aliases":
			if !isMap(vn) {
				bad(vn, path, "want a mapping of field -> list of other names, got %s", nodeWord(vn))
				continue
			}
			k.Aliases = map[string][]string{}
			for j := 0; j+1 < len(vn.Content); j += 2 {
				ak, av := vn.Content[j], resolve(vn.Content[j+1])
				items, ok := scalarList(av)
				if !ok {
					bad(av, path+"."+ak.Value, "want a name or a list of names, got %s", nodeWord(av))
					continue
				}
				k.KeyPos["aliases."+ak.Value] = pos(ak)
				k.AliasOrder = append(k.AliasOrder, ak.Value)
				for _, it := range items {
					k.Aliases[ak.Value] = append(k.Aliases[ak.Value], it.Value)
				}
			}
		default:
			bad(kn, path, "unknown key (want cap, fields, required, codes or aliases)")
		}
	}
	return k
}

func decodeMissingCode(cv *yaml.Node, path string, k *ClaimKind, bad func(*yaml.Node, string, string, ...any)) (MissingCode, bool) {
	if cv.Kind == yaml.ScalarNode {
		return MissingCode{Code: cv.Value}, true
	}
	if !isMap(cv) {
		bad(cv, path, "want an issue code or {code, args}, got %s", nodeWord(cv))
		return MissingCode{}, false
	}
	var mc MissingCode
	for i := 0; i+1 < len(cv.Content); i += 2 {
		key, val := cv.Content[i], resolve(cv.Content[i+1])
		switch key.Value {
		case "code":
			if val.Kind != yaml.ScalarNode {
				bad(val, path+".code", "want an issue code, got %s", nodeWord(val))
				continue
			}
			mc.Code = val.Value
		case "args":
			if !isMap(val) {
				bad(val, path+".args", "want a mapping of argument -> field, got %s", nodeWord(val))
				continue
			}
			mc.Args = map[string]string{}
			for j := 0; j+1 < len(val.Content); j += 2 {
				an, af := val.Content[j], resolve(val.Content[j+1])
				if af.Kind != yaml.ScalarNode {
					bad(af, path+".args."+an.Value, "want a field name, got %s", nodeWord(af))
					continue
				}
				mc.Args[an.Value] = af.Value
				mc.ArgOrder = append(mc.ArgOrder, an.Value)
				k.KeyPos[path[len("claims.kinds."+k.Name+"."):]+".args."+an.Value] = pos(af)
			}
		default:
			bad(key, path+"."+key.Value, "unknown key (want code or args)")
		}
	}
	return mc, true
}

func resolve(n *yaml.Node) *yaml.Node {
	for n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	return n
}

func pos(n *yaml.Node) Position { return Position{Line: n.Line, Column: n.Column} }

func isMap(n *yaml.Node) bool { return n.Kind == yaml.MappingNode }

// scalarList reads a list of scalars, or one scalar as a list of one.
func scalarList(n *yaml.Node) ([]*yaml.Node, bool) {
	switch n.Kind {
	case yaml.ScalarNode:
		if n.Tag == "!!null" {
			return nil, true
		}
		return []*yaml.Node{n}, true
	case yaml.SequenceNode:
		out := make([]*yaml.Node, 0, len(n.Content))
		for _, c := range n.Content {
			c = resolve(c)
			if c.Kind != yaml.ScalarNode {
				return nil, false
			}
			out = append(out, c)
		}
		return out, true
	}
	return nil, false
}

func nodeWord(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	}
	if n.Tag == "!!null" {
		return "null"
	}
	return strconv.Quote(n.Value)
}

// claimNamePattern is what a kind or field name must look like: it is a JSON key
// of the block and a step of the claim paths edits address ("orderClaims[2].amount").
var claimNamePattern = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// failAt records a problem of pack.yaml at a position: "pack.yaml:12:7: key: msg".
func (l *packLoader) failAt(file string, at Position, key, format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	if key != "" {
		msg = key + ": " + msg
	}
	where := l.file(file)
	if at.Line > 0 {
		where += ":" + at.String()
	}
	l.errs = append(l.errs, fmt.Errorf("%s: %s", where, msg))
}

// claimKinds checks claims.kinds: the shapes decoded, names, types, required
// fields, codes and aliases; it fills in the default cap.
func (l *packLoader) claimKinds(c *ClaimsContract) {
	if len(c.Kinds) > 0 && len(c.Caps) > 0 {
		l.fail(PackFile, "claims.caps", "drop it: claims.kinds declares each kind's cap")
	}
	if c.Kinds != nil && len(c.Kinds) == 0 {
		l.fail(PackFile, "claims.kinds", "empty: declare at least one claim kind, or leave kinds out for the seed's unitClaims, eventClaims and timelineClaims")
	}
	var evidenceFormats bool
	if l.p.Facts != nil {
		evidenceFormats = len(l.p.Facts.Evidence) > 0
	}
	seen := map[string]bool{}
	for i := range c.Kinds {
		k := &c.Kinds[i]
		for _, pr := range k.problems {
			l.failAt(PackFile, pr.pos, pr.path, "%s", pr.msg)
		}
		if k.problems != nil && k.Name == "" {
			continue // claims.kinds itself is not a mapping
		}
		base := "claims.kinds." + k.Name
		if !claimNamePattern.MatchString(k.Name) {
			l.failAt(PackFile, k.Pos, base, "a kind name is a JSON key made of letters, digits and _, not starting with a digit")
		}
		if seen[k.Name] {
			l.failAt(PackFile, k.Pos, base, "kind declared twice")
		}
		seen[k.Name] = true
		switch {
		case k.Cap < 0:
			l.failAt(PackFile, k.KeyPos["cap"], base+".cap", "must be positive, got %d (leave it out for the default %d)", k.Cap, DefaultClaimKindCap)
		case k.Cap == 0:
			k.Cap = DefaultClaimKindCap
		}
		if len(k.FieldOrder) == 0 && k.problems == nil {
			l.failAt(PackFile, k.Pos, base+".fields", "missing: a kind declares its fields (name: type)")
		}
		byType := map[FieldType]string{}
		for _, f := range k.FieldOrder {
			t := k.Fields[f]
			fpath := base + ".fields." + f
			if !claimNamePattern.MatchString(f) {
				l.failAt(PackFile, k.FieldPos[f], fpath, "a field name is a JSON key made of letters, digits and _, not starting with a digit")
			}
			if !t.Known() {
				l.failAt(PackFile, k.KeyPos["fields."+f], fpath, "unknown type %q (want one of %s)", string(t), fieldTypeList())
				continue
			}
			if t == FieldLevel || t == FieldEvidence {
				if prev, dup := byType[t]; dup {
					l.failAt(PackFile, k.FieldPos[f], fpath, "a kind has at most one %s field (%s is one already)", t, prev)
				}
				byType[t] = f
			}
			if t == FieldEvidence && !evidenceFormats {
				l.failAt(PackFile, k.KeyPos["fields."+f], fpath, "an evidence field needs the pack's evidence formats (facts.evidence); declare them, or make the field strings")
			}
		}
		required := map[string]bool{}
		for j, f := range k.Required {
			at := k.KeyPos["required["+strconv.Itoa(j)+"]"]
			switch {
			case k.Fields[f] == "":
				l.failAt(PackFile, at, base+".required", "%q is not a declared field (declared: %s)", f, strings.Join(k.FieldOrder, ", "))
			case required[f]:
				l.failAt(PackFile, at, base+".required", "%q is listed twice", f)
			}
			required[f] = true
		}
		for _, f := range sortedKeys(k.Codes) {
			mc := k.Codes[f]
			cpath := base + ".codes." + f
			at := k.KeyPos["codes."+f]
			if !required[f] {
				l.failAt(PackFile, at, cpath, "%q is not a required field: only a required field's absence has a code", f)
			}
			if strings.TrimSpace(mc.Code) == "" || strings.ContainsAny(mc.Code, " \t\r\n") {
				l.failAt(PackFile, at, cpath, "want an issue code (a word like order.missing_id), got %q", mc.Code)
			}
			for _, arg := range mc.ArgOrder {
				if field := mc.Args[arg]; k.Fields[field] == "" {
					l.failAt(PackFile, k.KeyPos["codes."+f+".args."+arg], cpath+".args."+arg, "%q is not a declared field", field)
				}
			}
		}
		names := map[string]string{} // alias -> field
		for _, f := range k.AliasOrder {
			apath := base + ".aliases." + f
			at := k.KeyPos["aliases."+f]
			if k.Fields[f] == "" {
				l.failAt(PackFile, at, apath, "%q is not a declared field", f)
			}
			if k.Fields[f] == FieldEvidence {
				l.failAt(PackFile, at, apath, "an evidence field has no aliases (its items are checked where they are written)")
			}
			for _, a := range k.Aliases[f] {
				switch {
				case !claimNamePattern.MatchString(a):
					l.failAt(PackFile, at, apath, "alias %q is not a JSON key made of letters, digits and _", a)
				case k.Fields[a] != "":
					l.failAt(PackFile, at, apath, "alias %q clashes with the declared field %q", a, a)
				case names[a] != "":
					l.failAt(PackFile, at, apath, "alias %q is already an alias of %q", a, names[a])
				default:
					names[a] = f
				}
			}
		}
	}
}

func fieldTypeList() string {
	names := make([]string, len(FieldTypes))
	for i, t := range FieldTypes {
		names[i] = string(t)
	}
	return strings.Join(names, ", ")
}

// jsonFence finds the ```json blocks of a contract text (group 1: the JSON).
var jsonFence = regexp.MustCompile("(?s)```(?:json|JSON)[ \t]*\r?\n(.*?)```")

// claimsContract checks the contract text against the declared kinds: it must
// mention every kind and field by name, and a claims block example in it (a
// ```json block after the marker, or one with a declared kind's array) may hold
// only declared kinds, and in their claims only declared fields or aliases. A
// contract without claims.kinds is not checked (the seed's defaults).
func (l *packLoader) claimsContract(c *ClaimsContract) {
	text := c.ContractText
	if len(c.Kinds) == 0 || text == "" {
		return
	}
	for i := range c.Kinds {
		k := &c.Kinds[i]
		if k.Name != "" && !mentions(text, k.Name) {
			l.failAt(PackFile, k.Pos, "claims.kinds."+k.Name, "the contract (%s) never mentions the kind %q", c.Contract, k.Name)
		}
		for _, f := range k.FieldOrder {
			if !mentions(text, f) {
				l.failAt(PackFile, k.FieldPos[f], "claims.kinds."+k.Name+".fields."+f, "the contract (%s) never mentions the field %q", c.Contract, f)
			}
		}
	}
	for _, m := range jsonFence.FindAllStringSubmatchIndex(text, -1) {
		start, end := m[2], m[3]
		block := text[start:end]
		if !rawjson.ValidString(block, 64) {
			if l.afterMarker(text, m[0], c.Marker) {
				line, col := lineCol(text, start)
				l.failAt(c.Contract, Position{line, col}, "", "the claims block example is not valid JSON: %v", rawjson.CheckString(block, 64))
			}
			continue
		}
		example := l.afterMarker(text, m[0], c.Marker)
		rawjson.EachMember(block, func(mem rawjson.Member) bool {
			if _, ok := c.Kinds.Kind(rawjson.Key(mem.Key)); ok {
				example = true
			}
			return true
		})
		if !example {
			continue
		}
		rawjson.EachMember(block, func(mem rawjson.Member) bool {
			name := rawjson.Key(mem.Key)
			line, col := lineCol(text, start+mem.KeyOff)
			at := Position{line, col}
			k, ok := c.Kinds.Kind(name)
			if !ok {
				if first := skipBlank(mem.Raw); first == '[' {
					l.failAt(c.Contract, at, "", "the example's claims array %q is not a declared kind (claims.kinds: %s)", name, strings.Join(c.Kinds.Names(), ", "))
				}
				return true
			}
			rawjson.EachElement(mem.Raw, func(v rawjson.Value) bool {
				rawjson.EachMember(v.Raw, func(fm rawjson.Member) bool {
					f := rawjson.Key(fm.Key)
					if k.Fields[f] != "" || k.aliasOf(f) != "" {
						return true
					}
					line, col := lineCol(text, start+mem.Off+v.Off+fm.KeyOff)
					l.failAt(c.Contract, Position{line, col}, "", "the example's %s claim has the field %q, which claims.kinds.%s does not declare", name, f, name)
					return true
				})
				return true
			})
			return true
		})
	}
}

// aliasOf returns the field a name is an alias of ("" when none).
func (k *ClaimKind) aliasOf(name string) string {
	for _, f := range k.AliasOrder {
		if slices.Contains(k.Aliases[f], name) {
			return f
		}
	}
	return ""
}

// afterMarker reports a fence at text[fence:] that follows the marker with only
// blanks between them.
func (l *packLoader) afterMarker(text string, fence int, marker string) bool {
	if marker == "" {
		return false
	}
	before := strings.TrimRight(text[:fence], " \t\r\n")
	return strings.HasSuffix(before, marker)
}

// mentions reports word in text as a whole word (not inside a longer name).
func mentions(text, word string) bool {
	for i := 0; ; {
		j := strings.Index(text[i:], word)
		if j < 0 {
			return false
		}
		j += i
		end := j + len(word)
		if (j == 0 || !isNameByte(text[j-1])) && (end == len(text) || !isNameByte(text[end])) {
			return true
		}
		i = j + 1
	}
}

func isNameByte(c byte) bool {
	return c == '_' || '0' <= c && c <= '9' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z'
}

func skipBlank(s string) byte {
	s = strings.TrimLeft(s, " \t\r\n")
	if s == "" {
		return 0
	}
	return s[0]
}

// lineCol returns the 1-based line and column (in characters) of text[off].
func lineCol(text string, off int) (int, int) {
	line := 1 + strings.Count(text[:off], "\n")
	col := 1 + utf8.RuneCountInString(text[strings.LastIndexByte(text[:off], '\n')+1:off])
	return line, col
}
