package claims

// The parser's walk over the block as it was before the raw walker (one gjson
// ForEach per array and object): the reference the differential test compares
// Parse with.

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/tidwall/gjson"

	"github.com/factgate/factgate/interceptors"
	"github.com/factgate/factgate/knowledge/rawjson"
)

// refState is parseState for the reference parser.
type refState struct {
	p        *Parser
	c        *Claims
	evidence []Evidence
	strs     []string
}

// Parse locates and reads the claims block of content. It never fails: problems
// are issues in the result (see the package documentation for codes and Args).
// The result's strings share content's memory.
func (p *Parser) refParse(content string, req Requirement) *Claims {
	c := &Claims{Location: p.Locate(content)}
	if !c.Found {
		sev := interceptors.Warning
		if req == Required {
			sev = interceptors.Fatal
		}
		msg := "the answer has no claims block"
		if p.marker != "" {
			msg = "the answer has no claims block after " + p.marker
		}
		c.Issues = append(c.Issues, issue(CodeMissing, sev, "", msg, "marker", p.marker))
		return c
	}
	c.Block = content[c.Span.Start:c.Span.End]
	if c.Span.Len() > MaxBlockBytes {
		c.invalid(fmt.Sprintf("the block is %d bytes, more than the %d allowed", c.Span.Len(), MaxBlockBytes))
		return c
	}
	if c.hasNorm {
		c.JSON = c.norm
	} else {
		norm, err := NormalizeString(c.Block)
		if err != nil {
			c.invalid(err.Error())
			return c
		}
		c.JSON = norm
	}
	if strings.TrimLeft(c.JSON, " \t\r\n") == "" {
		c.invalid("the block is empty")
		return c
	}
	// Normalising bounded the nesting already; the check is what the recursive
	// gjson code below relies on. Its position is in the normalised text, not the
	// answer, so only the problem is told.
	if err := rawjson.CheckString(c.JSON, MaxDepth); err != nil {
		why := err.Error()
		if se := (*rawjson.SyntaxError)(nil); errors.As(err, &se) {
			why = se.Problem
		}
		c.invalid(why)
		return c
	}
	root := gjson.Parse(c.JSON)
	if !root.IsObject() {
		typ := refJSONType(root)
		c.Issues = append(c.Issues, issue(CodeRootNotObject, interceptors.Fatal, "",
			"the claims block is a JSON "+typ+", not an object", "got", typ))
		return c
	}
	c.Valid = true
	st := refState{p: p, c: c}
	var fields [3]gjson.Result
	var seen [3]bool
	root.ForEach(func(k, v gjson.Result) bool {
		if kind, ok := kindOf(k.Str); ok && !seen[kind] {
			fields[kind], seen[kind] = v, true
		}
		return true
	})
	for kind := range fields {
		st.claimArray(claimKind(kind), fields[kind])
	}
	return c
}

func (st *refState) claimArray(kind claimKind, arr gjson.Result) {
	if !arr.IsArray() {
		return
	}
	limit := st.p.caps[kind]
	count := 0
	arr.ForEach(func(_, v gjson.Result) bool {
		if count < limit {
			switch kind {
			case unitKind:
				if st.c.UnitClaims == nil {
					st.c.UnitClaims = make([]UnitClaim, 0, min(limit, 16))
				}
				st.c.UnitClaims = append(st.c.UnitClaims, st.unitClaim(count, v))
			case eventKind:
				st.c.EventClaims = append(st.c.EventClaims, st.claim(kind, count, v))
			case timelineKind:
				st.c.TimelineClaims = append(st.c.TimelineClaims, st.claim(kind, count, v))
			}
		}
		count++
		return true
	})
	if count > limit {
		field := claimFields[kind]
		st.c.Issues = append(st.c.Issues, issue(CodeTruncated, interceptors.Info, field,
			fmt.Sprintf("%s has %d claims; only the first %d are kept", field, count, limit),
			"list", field, "count", strconv.Itoa(count), "cap", strconv.Itoa(limit)))
	}
}

func refReadClaimFields(v gjson.Result) claimFieldsOf {
	var f claimFieldsOf
	if !v.IsObject() {
		return f
	}
	v.ForEach(func(k, val gjson.Result) bool {
		var slot *gjson.Result
		var bit uint8
		switch k.Str {
		case "unitId":
			slot, bit = &f.unitID, hasUnitID
		case "player":
			slot, bit = &f.player, hasPlayer
		case "claim":
			slot, bit = &f.claim, hasClaim
		case "event":
			slot, bit = &f.event, hasEvent
		case "evidenceLevel":
			slot, bit = &f.level, hasLevel
		case "evidence":
			slot, bit = &f.evidence, hasEvidence
		case "alternatives":
			slot, bit = &f.alternatives, hasAlternatives
		case "needsConfirmation":
			slot, bit = &f.confirm, hasConfirm
		default:
			return true
		}
		if f.has&bit == 0 {
			*slot = val
			f.has |= bit
		}
		return true
	})
	return f
}

func (st *refState) unitClaim(i int, v gjson.Result) UnitClaim {
	p := st.p
	f := refReadClaimFields(v)
	u := UnitClaim{Path: p.claimPath(unitKind, i)}
	if f.has&hasUnitID != 0 {
		u.UnitIDRaw = refRawText(f.unitID)
		u.UnitID, u.HasUnitID = refUnitID(f.unitID)
	}
	u.Player = strings.TrimSpace(refTextOf(f.player))
	u.Claim = strings.TrimSpace(refTextOf(f.claim))
	u.Level, u.LevelRaw, u.LevelKnown = st.level(u.Path, f.level, f.has&hasLevel != 0)
	u.Evidence = st.evidenceList(unitKind, i, u.Path, f.evidence)
	u.Alternatives = st.stringList(f.alternatives)
	u.NeedsConfirmation = st.stringList(f.confirm)
	if !u.HasUnitID {
		msg := "the unit claim has no unitId"
		if u.UnitIDRaw != "" {
			msg = fmt.Sprintf("the unit claim's unitId %q is not a whole number", u.UnitIDRaw)
		}
		st.c.Issues = append(st.c.Issues, issue(CodeUnitMissingID, interceptors.Warning, u.Path, msg, "unit", u.UnitIDRaw, "claim", u.Claim))
	}
	if u.Claim == "" {
		id := u.UnitIDRaw
		if u.HasUnitID {
			id = strconv.FormatInt(u.UnitID, 10)
		}
		st.c.Issues = append(st.c.Issues, issue(CodeUnitMissingClaim, interceptors.Warning, u.Path,
			"the unit claim does not say what the unit is (no claim)", "unit", id))
	}
	return u
}

func (st *refState) claim(kind claimKind, i int, v gjson.Result) Claim {
	p := st.p
	f := refReadClaimFields(v)
	c := Claim{Path: p.claimPath(kind, i)}
	c.Claim = strings.TrimSpace(refTextOf(f.claim))
	if c.Claim == "" && kind == eventKind && f.has&hasEvent != 0 {
		if ev := strings.TrimSpace(refTextOf(f.event)); ev != "" {
			c.Claim, c.Aliased = ev, true
			st.c.Issues = append(st.c.Issues, issue(CodeFieldAlias, interceptors.Info, c.Path,
				`the event claim uses "event" instead of "claim"`, "alias", "event", "field", "claim"))
		}
	}
	c.Level, c.LevelRaw, c.LevelKnown = st.level(c.Path, f.level, f.has&hasLevel != 0)
	c.Evidence = st.evidenceList(kind, i, c.Path, f.evidence)
	c.NeedsConfirmation = st.stringList(f.confirm)
	return c
}

func (st *refState) level(path string, v gjson.Result, exists bool) (Level, string, bool) {
	raw := ""
	if exists {
		raw = refRawText(v)
		if v.Type == gjson.String {
			if l, ok := st.p.ParseLevel(v.Str); ok {
				return l, raw, true
			}
		}
	}
	msg := "the claim has no evidenceLevel; treated as uncertain"
	if exists {
		msg = fmt.Sprintf("evidenceLevel %q is not one of confirmed, highly likely, possible, uncertain, ruled out; treated as uncertain", raw)
	}
	st.c.Issues = append(st.c.Issues, issue(CodeUnknownLevel, interceptors.Info, path, msg, "level", raw))
	return Uncertain, raw, false
}

// evidenceList parses a claim's evidence array (a lone string counts as one item).
func (st *refState) evidenceList(kind claimKind, i int, claimPath string, v gjson.Result) []Evidence {
	if v.Type == gjson.String {
		return st.evidenceItems(kind, i, claimPath, v, 1)
	}
	if !v.IsArray() {
		return nil
	}
	n := 0
	v.ForEach(func(_, _ gjson.Result) bool { n++; return true })
	if n == 0 {
		return nil
	}
	return st.evidenceItems(kind, i, claimPath, v, n)
}

func (st *refState) evidenceItems(kind claimKind, i int, claimPath string, v gjson.Result, n int) []Evidence {
	if cap(st.evidence)-len(st.evidence) < n {
		st.evidence = make([]Evidence, 0, max(n, 32))
	}
	start := len(st.evidence)
	add := func(item gjson.Result) {
		j := len(st.evidence) - start
		path := st.p.evidencePath(kind, i, claimPath, j)
		var ev Evidence
		var err error
		if item.Type == gjson.String {
			ev, err = st.p.refParseEvidence(item.Str, &st.strs)
		} else {
			ev, err = Evidence{Raw: item.Raw}, fmt.Errorf("the item is a JSON %s, not a string", refJSONType(item))
		}
		ev.Path = path
		st.evidence = append(st.evidence, ev)
		if err != nil && (len(st.p.evidence) > 0 || item.Type != gjson.String) {
			st.c.Issues = append(st.c.Issues, issue(CodeEvidenceUnstructured, interceptors.Info, path,
				fmt.Sprintf("evidence %q is not structured evidence: %v", ev.Raw, err),
				"evidence", ev.Raw, "reason", err.Error()))
		}
	}
	if v.Type == gjson.String {
		add(v)
	} else {
		v.ForEach(func(_, item gjson.Result) bool { add(item); return true })
	}
	return st.evidence[start:len(st.evidence):len(st.evidence)]
}

// stringList reads an array of strings (a lone string counts as one item); blank
// and non-string items are skipped.
func (st *refState) stringList(v gjson.Result) []string {
	start := len(st.strs)
	add := func(item gjson.Result) {
		if item.Type != gjson.String {
			return
		}
		if s := strings.TrimSpace(item.Str); s != "" {
			st.strs = append(st.strs, s)
		}
	}
	switch {
	case v.Type == gjson.String:
		add(v)
	case v.IsArray():
		v.ForEach(func(_, item gjson.Result) bool { add(item); return true })
	}
	if len(st.strs) == start {
		return nil
	}
	return st.strs[start:len(st.strs):len(st.strs)]
}

// The gjson helpers the parser used before it read the block with its own walk.

// claimFieldsOf reads the fields of one claim object; the first occurrence of a
// field counts.
type claimFieldsOf struct {
	unitID, player, claim, event, level, evidence, alternatives, confirm gjson.Result
	has                                                                  uint8
}

const (
	hasUnitID = 1 << iota
	hasPlayer
	hasClaim
	hasEvent
	hasLevel
	hasEvidence
	hasAlternatives
	hasConfirm
)

// refUnitID reads a usable UnitId: a non-negative integer, a whole-number float,
// or a string of decimal digits.
func refUnitID(v gjson.Result) (int64, bool) {
	var s string
	switch v.Type {
	case gjson.Number:
		s = v.Raw
		if n, err := strconv.ParseInt(s, 10, 64); err == nil {
			if n < 0 {
				return 0, false
			}
			return n, true
		}
		f := v.Num
		if f >= 0 && f < 1<<53 && f == float64(int64(f)) {
			return int64(f), true
		}
		return 0, false
	case gjson.String:
		s = strings.TrimSpace(v.Str)
	default:
		return 0, false
	}
	if s == "" {
		return 0, false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, false
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, false
	}
	return n, true
}

// refTextOf returns a string value, or "" for anything else.
func refTextOf(v gjson.Result) string {
	if v.Type == gjson.String {
		return v.Str
	}
	return ""
}

// refRawText returns a string's value, or another value's JSON text.
func refRawText(v gjson.Result) string {
	if v.Type == gjson.String {
		return v.Str
	}
	return v.Raw
}

func refJSONType(v gjson.Result) string {
	switch {
	case v.IsObject():
		return "object"
	case v.IsArray():
		return "array"
	}
	switch v.Type {
	case gjson.String:
		return "string"
	case gjson.Number:
		return "number"
	case gjson.True, gjson.False:
		return "boolean"
	}
	return "null"
}
