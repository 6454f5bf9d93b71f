package claims

import (
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/tidwall/gjson"

	"github.com/factgate/factgate/interceptors"
	"github.com/factgate/factgate/knowledge"
	"github.com/factgate/factgate/knowledge/rawjson"
)

// The claims block's array fields, also the keys of ClaimsContract.Caps.
const (
	UnitClaimsField     = "unitClaims"
	EventClaimsField    = "eventClaims"
	TimelineClaimsField = "timelineClaims"
)

// ValidatorName is the Validator of every issue this package reports.
const ValidatorName = "claims"

// Default caps when the contract gives none.
const (
	DefaultUnitClaimsCap     = 10
	DefaultEventClaimsCap    = 5
	DefaultTimelineClaimsCap = 3
)

// The issue codes this package reports (PRODUCT.md §8).
const (
	CodeMissing              = "claims.missing"
	CodeJSONInvalid          = "claims.json_invalid"
	CodeRootNotObject        = "claims.root_not_object"
	CodeTruncated            = "claims.truncated"
	CodeFieldAlias           = "claims.field_alias"
	CodeUnknownLevel         = "claims.unknown_evidence_level"
	CodeEvidenceUnstructured = "evidence.unstructured"
	CodeUnitMissingID        = "unit.missing_id"
	CodeUnitMissingClaim     = "unit.missing_claim"
)

type claimKind int

const (
	unitKind claimKind = iota
	eventKind
	timelineKind
)

var claimFields = [...]string{unitKind: UnitClaimsField, eventKind: EventClaimsField, timelineKind: TimelineClaimsField}

var defaultCaps = [...]int{unitKind: DefaultUnitClaimsCap, eventKind: DefaultEventClaimsCap, timelineKind: DefaultTimelineClaimsCap}

// Requirement says whether the route requires a claims block.
type Requirement int

const (
	// Optional (the zero value) reports a missing block as a Warning.
	Optional Requirement = iota
	// Required reports a missing block as Fatal, which triggers a repair request.
	Required
)

// Claims is the parsed claims block of one answer.
type Claims struct {
	// Location says where the block and the marker are in the content.
	Location
	// Block is the block's JSON text as written (content[Span]); "" when not Found.
	Block string
	// JSON is the normalised block (see Normalize); valid JSON when Valid.
	JSON string
	// Valid reports that the block parsed as a JSON object. When false, the claim
	// lists are empty and Issues holds the Fatal (or, for an optional missing block,
	// Warning) reason.
	Valid bool
	// UnitClaims, EventClaims and TimelineClaims are the claims kept after the caps,
	// in order; their index in the slice is their index in the JSON array.
	UnitClaims     []UnitClaim
	EventClaims    []Claim
	TimelineClaims []Claim
	// Issues are the format and self-consistency issues: per array (unitClaims,
	// eventClaims, timelineClaims) its claims' issues in order, then its truncation.
	Issues []interceptors.Issue
}

// Usable reports a block that parsed (no Fatal format issue): the validators can
// check its claims.
func (c *Claims) Usable() bool { return c != nil && c.Found && c.Valid }

// UnitClaim is one item of unitClaims: a guess at what a UnitId is.
type UnitClaim struct {
	// Path locates the claim: "unitClaims[2]".
	Path string
	// UnitID is the claimed unit; meaningful only when HasUnitID.
	UnitID int64
	// HasUnitID reports a usable unitId (an integer or a string of digits).
	HasUnitID bool
	// UnitIDRaw is the unitId as written (a string's value, else its JSON text; ""
	// when absent).
	UnitIDRaw string
	// Player is the player the claim is about ("" when absent).
	Player string
	// Claim is the claimed asset ("AlliedMCV"), trimmed; "" when absent.
	Claim string
	// Level is the evidence level; Uncertain when LevelKnown is false.
	Level Level
	// LevelRaw is the evidenceLevel as written ("" when absent).
	LevelRaw string
	// LevelKnown reports that LevelRaw is a known spelling.
	LevelKnown bool
	// Evidence is the evidence list, in order.
	Evidence []Evidence
	// Alternatives are the other candidates the claim names.
	Alternatives []string
	// NeedsConfirmation lists what would confirm the claim.
	NeedsConfirmation []string
}

// Claim is one item of eventClaims or timelineClaims.
type Claim struct {
	// Path locates the claim: "eventClaims[0]".
	Path string
	// Claim is the claim text, trimmed ("event" in eventClaims when "claim" is
	// absent or empty).
	Claim string
	// Aliased reports that Claim came from the "event" field.
	Aliased bool
	// Level is the evidence level; Uncertain when LevelKnown is false.
	Level Level
	// LevelRaw is the evidenceLevel as written ("" when absent).
	LevelRaw string
	// LevelKnown reports that LevelRaw is a known spelling.
	LevelKnown bool
	// Evidence is the evidence list, in order.
	Evidence []Evidence
	// NeedsConfirmation is the optional needsConfirmation list (the contract does
	// not ask for it on event and timeline claims; a downgrade lists the evidence
	// items it removed there).
	NeedsConfirmation []string
}

// Parser reads the claims block of answers under one pack's claims contract. It is
// built once per pack and is safe for concurrent use.
type Parser struct {
	marker        string
	caps          [3]int
	levels        map[string]Level
	evidence      map[string]evidenceType
	evidenceNames string
	paths         [3]claimPaths
}

// Precomputed paths: claims below maxPathClaims and evidence below maxPathEvidence
// get their paths without allocating.
const (
	maxPathClaims   = 64
	maxPathEvidence = 16
)

type claimPaths struct {
	claim    []string
	evidence [][]string
}

// NewParser builds a Parser from a pack's claims contract and its structured
// evidence types (knowledge.FactRules.Evidence: type -> parameter names, whose count
// is the type's arity). A nil contract means no marker, the default caps and only
// the English level spellings; a nil evidence map means evidence is free text (no
// evidence.unstructured issues). It returns an error naming the offending key or
// value for an unknown cap, a negative cap, an unknown level, an empty or ambiguous
// level spelling, or an evidence type that is empty, contains "|" or blanks, or is
// declared twice in different cases.
func NewParser(c *knowledge.ClaimsContract, evidence map[string][]string) (*Parser, error) {
	p := &Parser{
		caps:     defaultCaps,
		levels:   make(map[string]Level, len(englishLevels)+8),
		evidence: make(map[string]evidenceType, len(evidence)),
	}
	for k, l := range englishLevels {
		p.levels[k] = l
	}
	if c != nil {
		p.marker = c.Marker
		for field, n := range c.Caps {
			kind, ok := kindOf(field)
			if !ok {
				return nil, fmt.Errorf("claims contract: unknown cap %q (want %s, %s or %s)", field, UnitClaimsField, EventClaimsField, TimelineClaimsField)
			}
			if n < 0 {
				return nil, fmt.Errorf("claims contract: cap %s is %d; want a positive number (0 means the default %d)", field, n, defaultCaps[kind])
			}
			if n > 0 {
				p.caps[kind] = n
			}
		}
		for name, spellings := range c.Levels {
			l, ok := ParseLevel(name)
			if !ok {
				return nil, fmt.Errorf("claims contract: unknown evidence level %q in levels (want confirmed, highly likely, possible, uncertain or ruled out)", name)
			}
			for _, sp := range spellings {
				var buf [maxLevelKey]byte
				k, ok := levelKey(sp, &buf)
				if !ok {
					return nil, fmt.Errorf("claims contract: level %q has an empty or over-long spelling %q", name, sp)
				}
				if prev, dup := p.levels[string(k)]; dup && prev != l {
					return nil, fmt.Errorf("claims contract: spelling %q of level %q already means %q", sp, l, prev)
				}
				p.levels[string(k)] = l
			}
		}
	}
	names := make([]string, 0, len(evidence))
	for typ, params := range evidence {
		name := strings.ToLower(typ)
		if name == "" || len(name) > maxEvidenceType || strings.ContainsAny(name, "| \t\r\n") {
			return nil, fmt.Errorf("claims: evidence type %q must be a non-empty word of at most %d bytes without \"|\" or blanks", typ, maxEvidenceType)
		}
		if _, dup := p.evidence[name]; dup {
			return nil, fmt.Errorf("claims: evidence type %q is declared twice (types are compared in any case)", typ)
		}
		p.evidence[name] = evidenceType{name: name, arity: len(params)}
		names = append(names, name)
	}
	sort.Strings(names)
	p.evidenceNames = strings.Join(names, ", ")
	for kind := range p.paths {
		n := min(p.caps[kind], maxPathClaims)
		cp := claimPaths{claim: make([]string, n), evidence: make([][]string, n)}
		for i := range n {
			cp.claim[i] = claimPath(claimKind(kind), i)
			cp.evidence[i] = make([]string, maxPathEvidence)
			for j := range maxPathEvidence {
				cp.evidence[i][j] = evidencePath(cp.claim[i], j)
			}
		}
		p.paths[kind] = cp
	}
	return p, nil
}

// Marker returns the marker that precedes the claims block ("" when none).
func (p *Parser) Marker() string { return p.marker }

// Cap returns the cap of a claims field (UnitClaimsField...), or 0 for another name.
func (p *Parser) Cap(field string) int {
	if k, ok := kindOf(field); ok {
		return p.caps[k]
	}
	return 0
}

// ParseLevel reads an evidence level in the English spellings ParseLevel accepts
// or one of the pack's extra spellings.
func (p *Parser) ParseLevel(s string) (Level, bool) {
	var buf [maxLevelKey]byte
	k, ok := levelKey(s, &buf)
	if !ok {
		return Uncertain, false
	}
	l, ok := p.levels[string(k)]
	return l, ok
}

func kindOf(field string) (claimKind, bool) {
	for k, f := range claimFields {
		if f == field {
			return claimKind(k), true
		}
	}
	return 0, false
}

func claimPath(kind claimKind, i int) string {
	return claimFields[kind] + "[" + strconv.Itoa(i) + "]"
}

func evidencePath(claim string, j int) string {
	return claim + ".evidence[" + strconv.Itoa(j) + "]"
}

func (p *Parser) claimPath(kind claimKind, i int) string {
	if cp := p.paths[kind].claim; i < len(cp) {
		return cp[i]
	}
	return claimPath(kind, i)
}

func (p *Parser) evidencePath(kind claimKind, i int, claim string, j int) string {
	if ep := p.paths[kind].evidence; i < len(ep) && j < len(ep[i]) {
		return ep[i][j]
	}
	return evidencePath(claim, j)
}

// Parse locates and reads the claims block of content. It never fails: problems
// are issues in the result (see the package documentation for codes and Args).
// The result's strings share content's memory.
func (p *Parser) Parse(content string, req Requirement) *Claims {
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
		typ := jsonType(root)
		c.Issues = append(c.Issues, issue(CodeRootNotObject, interceptors.Fatal, "",
			"the claims block is a JSON "+typ+", not an object", "got", typ))
		return c
	}
	c.Valid = true
	// Every evidence parameter follows a "|": the arena of the parameters (and of
	// the few alternatives and confirmations) is allocated once.
	st := parseState{p: p, c: c, strs: make([]string, 0, strings.Count(c.JSON, "|")+8)}
	var fields [3]string // the arrays' raw text
	var seen [3]bool
	for it := membersOf(root.Raw); ; {
		k, v, ok := it.next()
		if !ok {
			break
		}
		if kind, ok := kindOf(rawjson.Key(k)); ok && !seen[kind] {
			fields[kind], seen[kind] = v, true
		}
	}
	for kind := range fields {
		st.claimArray(claimKind(kind), fields[kind])
	}
	return c
}

func (c *Claims) invalid(reason string) {
	c.Issues = append(c.Issues, issue(CodeJSONInvalid, interceptors.Fatal, "",
		"the claims block is not valid JSON: "+reason, "error", reason))
}

// parseState holds one Parse call's shared buffers.
type parseState struct {
	p        *Parser
	c        *Claims
	evidence []Evidence // arena for the claims' evidence lists
	strs     []string   // arena for parameters, alternatives and confirmations
}

func (st *parseState) claimArray(kind claimKind, arr string) {
	if arr == "" || arr[0] != '[' {
		return
	}
	limit := st.p.caps[kind]
	count := 0
	for it := elementsOf(arr); ; {
		raw, ok := it.next()
		if !ok {
			break
		}
		if count < limit {
			v := gjson.Parse(raw)
			switch kind {
			case unitKind:
				if st.c.UnitClaims == nil {
					st.c.UnitClaims = make([]UnitClaim, 0, min(limit, 16))
				}
				st.c.UnitClaims = append(st.c.UnitClaims, st.unitClaim(count, v))
			case eventKind:
				if st.c.EventClaims == nil {
					st.c.EventClaims = make([]Claim, 0, min(limit, 16))
				}
				st.c.EventClaims = append(st.c.EventClaims, st.claim(kind, count, v))
			case timelineKind:
				if st.c.TimelineClaims == nil {
					st.c.TimelineClaims = make([]Claim, 0, min(limit, 16))
				}
				st.c.TimelineClaims = append(st.c.TimelineClaims, st.claim(kind, count, v))
			}
		}
		count++
	}
	if count > limit {
		field := claimFields[kind]
		st.c.Issues = append(st.c.Issues, issue(CodeTruncated, interceptors.Info, field,
			fmt.Sprintf("%s has %d claims; only the first %d are kept", field, count, limit),
			"list", field, "count", strconv.Itoa(count), "cap", strconv.Itoa(limit)))
	}
}

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

func readClaimFields(v gjson.Result) claimFieldsOf {
	var f claimFieldsOf
	if !v.IsObject() {
		return f
	}
	for it := membersOf(v.Raw); ; {
		k, raw, ok := it.next()
		if !ok {
			break
		}
		var slot *gjson.Result
		var bit uint8
		switch rawjson.Key(k) {
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
			continue
		}
		if f.has&bit == 0 {
			*slot = gjson.Parse(raw)
			f.has |= bit
		}
	}
	return f
}

func (st *parseState) unitClaim(i int, v gjson.Result) UnitClaim {
	p := st.p
	f := readClaimFields(v)
	u := UnitClaim{Path: p.claimPath(unitKind, i)}
	if f.has&hasUnitID != 0 {
		u.UnitIDRaw = rawText(f.unitID)
		u.UnitID, u.HasUnitID = unitID(f.unitID)
	}
	u.Player = strings.TrimSpace(textOf(f.player))
	u.Claim = strings.TrimSpace(textOf(f.claim))
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

func (st *parseState) claim(kind claimKind, i int, v gjson.Result) Claim {
	p := st.p
	f := readClaimFields(v)
	c := Claim{Path: p.claimPath(kind, i)}
	c.Claim = strings.TrimSpace(textOf(f.claim))
	if c.Claim == "" && kind == eventKind && f.has&hasEvent != 0 {
		if ev := strings.TrimSpace(textOf(f.event)); ev != "" {
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

func (st *parseState) level(path string, v gjson.Result, exists bool) (Level, string, bool) {
	raw := ""
	if exists {
		raw = rawText(v)
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
func (st *parseState) evidenceList(kind claimKind, i int, claimPath string, v gjson.Result) []Evidence {
	if v.Type == gjson.String {
		return st.evidenceItems(kind, i, claimPath, v, 1)
	}
	if !v.IsArray() {
		return nil
	}
	n := 0
	for it := elementsOf(v.Raw); ; n++ {
		if _, ok := it.next(); !ok {
			break
		}
	}
	if n == 0 {
		return nil
	}
	return st.evidenceItems(kind, i, claimPath, v, n)
}

func (st *parseState) evidenceItems(kind claimKind, i int, claimPath string, v gjson.Result, n int) []Evidence {
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
			ev, err = st.p.parseEvidence(item.Str, &st.strs)
		} else {
			ev, err = Evidence{Raw: item.Raw}, fmt.Errorf("the item is a JSON %s, not a string", jsonType(item))
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
		for it := elementsOf(v.Raw); ; {
			raw, ok := it.next()
			if !ok {
				break
			}
			add(gjson.Parse(raw))
		}
	}
	return st.evidence[start:len(st.evidence):len(st.evidence)]
}

// stringList reads an array of strings (a lone string counts as one item); blank
// and non-string items are skipped.
func (st *parseState) stringList(v gjson.Result) []string {
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
		for it := elementsOf(v.Raw); ; {
			raw, ok := it.next()
			if !ok {
				break
			}
			if raw[0] == '"' { // other items are skipped
				add(gjson.Parse(raw))
			}
		}
	}
	if len(st.strs) == start {
		return nil
	}
	return st.strs[start:len(st.strs):len(st.strs)]
}

// unitID reads a usable UnitId: a non-negative integer, a whole-number float, or a
// string of decimal digits.
func unitID(v gjson.Result) (int64, bool) {
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

// textOf returns a string value, or "" for anything else.
func textOf(v gjson.Result) string {
	if v.Type == gjson.String {
		return v.Str
	}
	return ""
}

// rawText returns a string's value, or another value's JSON text.
func rawText(v gjson.Result) string {
	if v.Type == gjson.String {
		return v.Str
	}
	return v.Raw
}

func jsonType(v gjson.Result) string {
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

// issue builds an Issue; args are key/value pairs.
func issue(code string, sev interceptors.Severity, path, msg string, args ...string) interceptors.Issue {
	is := interceptors.Issue{Code: code, Severity: sev, Path: path, Message: msg, Validator: ValidatorName}
	if len(args) > 0 {
		is.Args = make(map[string]string, len(args)/2)
		for i := 0; i+1 < len(args); i += 2 {
			is.Args[args[i]] = args[i+1]
		}
	}
	return is
}
