package claims

import (
	"errors"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"

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
	// Records are every claim of every declared kind, in the block's kind order
	// (pack.yaml's), each kind's claims in array order: the claims read
	// generically, for every pack (for ra3 they wrap the typed claims above).
	Records []Record
	// kinds are the declared kinds of the parser that read c (nil: the seed's).
	kinds []*kindSpec
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
	evidence      map[string]evidenceType // by lower-case name
	types         []evidenceType          // the same, by name
	evidenceNames string
	paths         [3]claimPaths
	// kinds are the declared claim kinds, in order; typed reports that they are
	// the seed's three, which the typed reader reads (filling Records from its
	// claims) instead of the generic one.
	kinds []*kindSpec
	typed bool
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
	kinds := c.ClaimKinds()
	for i := range kinds {
		p.kinds = append(p.kinds, newKindSpec(&kinds[i]))
	}
	if p.typed = isSeedShape(kinds); p.typed && c != nil && len(c.Kinds) > 0 {
		for _, k := range p.kinds {
			if kind, ok := kindOf(k.name); ok {
				p.caps[kind] = k.cap
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
	p.types = make([]evidenceType, len(names))
	for i, name := range names {
		p.types[i] = p.evidence[name]
	}
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

// Cap returns the cap of a declared claim kind (UnitClaimsField...), or 0 for
// another name.
func (p *Parser) Cap(field string) int {
	if i := p.kindIndex(field); i >= 0 {
		if k, ok := kindOf(field); ok && p.typed {
			return p.caps[k]
		}
		return p.kinds[i].cap
	}
	return 0
}

// Required returns the required fields of a declared kind, in order (nil for
// another name).
func (p *Parser) Required(kind string) []string {
	i := p.kindIndex(kind)
	if i < 0 {
		return nil
	}
	k := p.kinds[i]
	out := make([]string, len(k.required))
	for j, slot := range k.required {
		out[j] = k.fields[slot].name
	}
	return out
}

// Kinds returns the names of the declared claim kinds, in order.
func (p *Parser) Kinds() []string {
	out := make([]string, len(p.kinds))
	for i, k := range p.kinds {
		out[i] = k.name
	}
	return out
}

// ParseLevel reads an evidence level in the English spellings ParseLevel accepts
// or one of the pack's extra spellings.
func (p *Parser) ParseLevel(s string) (Level, bool) {
	if l, ok := canonicalLevel(s); ok {
		return l, true
	}
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
	return p.parseAt(content, p.Locate(content), req)
}

// parseAt is Parse with the block at loc, where Locate found it in content.
func (p *Parser) parseAt(content string, loc Location, req Requirement) *Claims {
	c := &Claims{}
	sc := readScratchPool.Get().(*readScratch)
	p.parseInto(c, content, loc, req, sc, false)
	sc.release()
	return c
}

// ReadIn is ParseIn for a caller that only reads the result while use runs, as
// checking an answer does: the claim lists and evidence items are read into
// buffers this parser reuses, not copied into lists of their own, so a clean
// answer's parse allocates nothing. use must not keep c, its lists or any
// slice of them once it returns (their strings it may keep: they share
// content's memory or are the parser's own); a list that must outlive use is
// copied (or parsed with ParseIn).
//
// Lifetime: c and its lists only inside use; the parser's scratch is reused after (docs/architecture.md, Lifetimes).
func (p *Parser) ReadIn(l *Locations, content string, req Requirement, use func(c *Claims)) {
	sc := readScratchPool.Get().(*readScratch)
	p.parseInto(&sc.parsed, content, p.LocateIn(l, content), req, sc, true)
	use(&sc.parsed)
	sc.release()
}

// parseInto parses the block at loc into *c (a zero Claims), collecting the
// lists in sc's buffers; transient leaves them there (ReadIn), else they are
// copied out and sc is left empty.
func (p *Parser) parseInto(c *Claims, content string, loc Location, req Requirement, sc *readScratch, transient bool) {
	c.Location = loc
	c.kinds = p.kinds
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
		return
	}
	c.Block = content[c.Span.Start:c.Span.End]
	if c.Span.Len() > MaxBlockBytes {
		c.invalid(fmt.Sprintf("the block is %d bytes, more than the %d allowed", c.Span.Len(), MaxBlockBytes))
		return
	}
	switch {
	case c.hasNorm:
		// The fallback normalised the block and checked the result, so the read
		// cannot fail.
		c.JSON = c.norm
		p.read(c, sc, transient)
	case p.readStrict(c, sc, transient):
	default:
		p.readTolerant(c, sc, transient)
	}
}

// readStrict reads the block as written, checking it in the same walk. Valid JSON
// holds nothing Normalize removes (comments, byte order marks and trailing commas
// are invalid outside strings) and nests no deeper than it allows, so normalising
// it would return the block itself. It reports false, leaving c as it was, when
// the block is not strict JSON.
func (p *Parser) readStrict(c *Claims, sc *readScratch, transient bool) bool {
	c.JSON = c.Block
	if p.read(c, sc, transient) {
		return true
	}
	c.JSON = ""
	return false
}

// readTolerant normalises the block and reads the result, or reports why the
// block is not valid JSON.
func (p *Parser) readTolerant(c *Claims, sc *readScratch, transient bool) {
	norm, err := NormalizeString(c.Block)
	if err != nil {
		c.invalid(err.Error())
		return
	}
	c.JSON = norm
	if strings.TrimLeft(c.JSON, " \t\r\n") == "" {
		c.invalid("the block is empty")
		return
	}
	// An unchanged block failed readStrict already.
	if norm == c.Block || !p.read(c, sc, transient) {
		c.invalid(syntaxProblem(c.JSON))
	}
}

// syntaxProblem says what is wrong with a text the walk refused, in
// rawjson.CheckString's words. The position is in the normalised text, not the
// answer, so only the problem is told.
func syntaxProblem(s string) string {
	err := rawjson.CheckString(s, MaxDepth)
	if se := (*rawjson.SyntaxError)(nil); errors.As(err, &se) {
		return se.Problem
	}
	if err != nil {
		return err.Error()
	}
	return "invalid JSON" // not reached: the walk refuses exactly what the check does
}

// read reads c.JSON, checking it in the same walk (see rawjson.Walker): the root
// object's claim arrays, or the claims.root_not_object issue for another valid
// root. It reports false, leaving c as it was, when c.JSON is not valid JSON
// nested at most MaxDepth levels deep. The lists are collected in sc's buffers
// (empty on entry); transient leaves them there for the caller, else they are
// copied out (see settle), and sc is left empty whenever the read fails.
func (p *Parser) read(c *Claims, sc *readScratch, transient bool) bool {
	s := c.JSON
	st := parseState{p: p, c: c, w: rawjson.NewWalker(s, MaxDepth), transient: transient}
	root := skipSpace(s, 0)
	if root >= len(s) || s[root] != '{' {
		if !st.w.End(st.w.Value(root)) {
			return false
		}
		typ := jsonType(s[root:])
		c.Issues = append(c.Issues, issue(CodeRootNotObject, interceptors.Fatal, "",
			"the claims block is a JSON "+typ+", not an object", "got", typ))
		return true
	}
	if !p.typed {
		return p.readGeneric(c, &st, root)
	}
	issues := c.Issues
	st.evidence, st.units, st.claims = sc.evidence, sc.units, sc.claims
	if transient {
		st.strs = sc.strs
	}
	var seen [3]bool
	var order arrayOrder
	end := st.w.Members(root, func(key string, v int) int {
		kind, ok := kindOf(key)
		if !ok || seen[kind] {
			return -1
		}
		seen[kind] = true
		if s[v] != '[' {
			return -1 // the first occurrence counts even when it is not an array
		}
		order.begin(kind, len(c.Issues))
		return st.claimArray(kind, v)
	})
	ok := st.w.End(end)
	if ok {
		c.Valid = true
		c.Issues = order.sortIssues(c.Issues)
		st.settle(&order)
		if n := len(c.UnitClaims) + len(c.EventClaims) + len(c.TimelineClaims); n > 0 {
			if transient {
				sc.records = c.recordsFromTyped(sc.records[:0])
				c.Records = sc.records
			} else {
				c.Records = c.recordsFromTyped(make([]Record, 0, n))
			}
		}
	} else {
		c.Issues = issues
	}
	sc.evidence, sc.units, sc.claims = st.evidence, st.units, st.claims
	if transient {
		sc.strs = st.strs
	}
	if !ok || !transient {
		sc.empty() // nothing of the read is kept in sc
	}
	return ok
}

func (c *Claims) invalid(reason string) {
	c.Issues = append(c.Issues, issue(CodeJSONInvalid, interceptors.Fatal, "",
		"the claims block is not valid JSON: "+reason, "error", reason))
}

// arrayOrder remembers the order in which the walk met the claim arrays and where
// each one's issues begin, so that the issues can be reported array by array in
// the order unitClaims, eventClaims, timelineClaims whatever the block's order.
type arrayOrder struct {
	kinds [3]claimKind
	start [3]int // offset in Claims.Issues of each array's first issue
	n     int
}

func (o *arrayOrder) begin(kind claimKind, issues int) {
	o.kinds[o.n], o.start[o.n] = kind, issues
	o.n++
}

// sortIssues returns the issues with each array's run in the canonical order
// (the issues before the first array's stay first).
func (o *arrayOrder) sortIssues(issues []interceptors.Issue) []interceptors.Issue {
	sorted := true
	for k := 1; k < o.n; k++ {
		sorted = sorted && o.kinds[k-1] < o.kinds[k]
	}
	if sorted || len(issues) == o.start[0] {
		return issues
	}
	out := make([]interceptors.Issue, 0, len(issues))
	out = append(out, issues[:o.start[0]]...)
	for kind := range claimKind(len(claimFields)) {
		for k := range o.n {
			if o.kinds[k] != kind {
				continue
			}
			end := len(issues)
			if k+1 < o.n {
				end = o.start[k+1]
			}
			out = append(out, issues[o.start[k]:end]...)
		}
	}
	return out
}

// parseState holds one read's walker and shared buffers.
type parseState struct {
	p         *Parser
	c         *Claims
	w         rawjson.Walker
	transient bool         // the lists stay in the scratch buffers (see read)
	evidence  []Evidence   // the claims' evidence items in walk order (see settle)
	units     []UnitClaim  // the unit claims (see claimArray)
	claims    []Claim      // the event and timeline claims, one run per array
	runs      [3]claimRun  // where each array's claims are in units or claims
	strs      []string     // arena for parameters, alternatives and confirmations (see strArena)
	generic   genericClaim // the generic reader's values of the claim it reads
}

// claimRun is where one array's claims are in parseState.units or .claims.
type claimRun struct{ start, end int }

// strArena returns the arena of parameters, alternatives and confirmations,
// allocated at its first use: every evidence parameter follows a "|", so it is
// allocated once (a transient read reuses the scratch's).
func (st *parseState) strArena() *[]string {
	if st.strs == nil {
		st.strs = make([]string, 0, strings.Count(st.c.JSON, "|")+8)
	}
	return &st.strs
}

// claimArray reads the claims array at c.JSON[at] and returns the offset just
// past it.
func (st *parseState) claimArray(kind claimKind, at int) int {
	limit := st.p.caps[kind]
	count := 0
	start := len(st.claims)
	if kind == unitKind {
		start = len(st.units)
	}
	end := st.w.Elements(at, func(v int) int {
		i := count
		count++
		if i >= limit {
			return -1 // dropped: only counted
		}
		return st.addClaim(kind, i, v)
	})
	// The claims were read into the scratch buffer, which settle makes the
	// lists of (each array is read once: the first occurrence counts).
	if kind == unitKind {
		st.runs[kind] = claimRun{start, len(st.units)}
	} else {
		st.runs[kind] = claimRun{start, len(st.claims)}
	}
	if count > limit {
		field := claimFields[kind]
		st.c.Issues = append(st.c.Issues, issue(CodeTruncated, interceptors.Info, field,
			fmt.Sprintf("%s has %d claims; only the first %d are kept", field, count, limit),
			"list", field, "count", strconv.Itoa(count), "cap", strconv.Itoa(limit)))
	}
	return end
}

// addClaim reads claim i of a claims array at c.JSON[at], appends it to the
// scratch list of its kind and returns the offset just past it (-1 for a value
// it did not walk). The claim is read into its place in the list, not copied
// there: a claim is a few hundred bytes of strings, and a copy into the heap
// pays a write barrier per pointer while the collector runs.
func (st *parseState) addClaim(kind claimKind, i, at int) int {
	if kind == unitKind {
		st.units = append(st.units, UnitClaim{})
		return st.unitClaim(&st.units[len(st.units)-1], i, at)
	}
	st.claims = append(st.claims, Claim{})
	return st.claim(&st.claims[len(st.claims)-1], kind, i, at)
}

// exactCopy returns a copy of list of its exact length, or nil for an empty one.
func exactCopy[T any](list []T) []T {
	if len(list) == 0 {
		return nil
	}
	out := make([]T, len(list))
	copy(out, list)
	return out
}

// claimValues are the fields of one claim object, read in one walk over it; the
// first occurrence of a field counts. The lists are read where the walk meets
// them; the other fields are kept for the claim to interpret.
type claimValues struct {
	unitID, player, claim, event, level value
	evidence                            []Evidence
	alternatives, confirm               []string
	lists                               uint8 // the list fields met (listEvidence...)
}

const (
	listEvidence = 1 << iota
	listAlternatives
	listConfirm
)

// readClaim reads the fields a claim of kind uses from the claim object at
// c.JSON[at] into *f (which holds none), and returns the offset just past the
// object (-1 when the claim is not an object: it then has no fields). The
// evidence items' issues are added to c.Issues as the items are read.
func (st *parseState) readClaim(f *claimValues, kind claimKind, i int, path string, at int) int {
	s := st.c.JSON
	if s[at] != '{' {
		return -1
	}
	unit, event := kind == unitKind, kind == eventKind
	end := st.w.Members(at, func(key string, v int) int {
		switch key {
		case "unitId":
			return st.readField(v, &f.unitID, unit)
		case "player":
			return st.readField(v, &f.player, unit)
		case "claim":
			return st.readField(v, &f.claim, true)
		case "event":
			return st.readField(v, &f.event, event)
		case "evidenceLevel":
			return st.readField(v, &f.level, true)
		case "evidence":
			if !f.first(listEvidence) {
				return -1
			}
			var end int
			f.evidence, end = st.evidenceList(kind, i, path, v)
			return end
		case "alternatives":
			if !unit || !f.first(listAlternatives) {
				return -1
			}
			var end int
			f.alternatives, end = st.stringList(v)
			return end
		case "needsConfirmation":
			if !f.first(listConfirm) {
				return -1
			}
			var end int
			f.confirm, end = st.stringList(v)
			return end
		}
		return -1
	})
	return end
}

// first reports the first occurrence of a list field, and marks it met.
func (f *claimValues) first(list uint8) bool {
	if f.lists&list != 0 {
		return false
	}
	f.lists |= list
	return true
}

// readField reads the value at c.JSON[at] into *v when the claim uses the field
// and has not met it before. It returns the offset just past the value, or -1
// when it left the value to the walker (or the walk failed).
func (st *parseState) readField(at int, v *value, used bool) int {
	if !used || v.exists() {
		return -1
	}
	var end int
	*v, end = readValue(&st.w, st.c.JSON, at)
	return end
}

// unitClaim reads unit claim i at c.JSON[at] into *u (a zero UnitClaim) and
// returns the offset just past it.
func (st *parseState) unitClaim(u *UnitClaim, i, at int) int {
	p := st.p
	u.Path = p.claimPath(unitKind, i)
	own := len(st.c.Issues) // the claim's level issue precedes its evidence's issues
	var f claimValues
	end := st.readClaim(&f, unitKind, i, u.Path, at)
	if f.unitID.exists() {
		u.UnitIDRaw = f.unitID.rawText()
		u.UnitID, u.HasUnitID = unitID(f.unitID)
	}
	u.Player = trimSpace(f.player.text())
	u.Claim = trimSpace(f.claim.text())
	u.Level, u.LevelRaw, u.LevelKnown = st.level(&own, u.Path, f.level)
	u.Evidence = f.evidence
	u.Alternatives = f.alternatives
	u.NeedsConfirmation = f.confirm
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
	return end
}

// claim reads claim i of eventClaims or timelineClaims at c.JSON[at] into *c (a
// zero Claim) and returns the offset just past it.
func (st *parseState) claim(c *Claim, kind claimKind, i, at int) int {
	p := st.p
	c.Path = p.claimPath(kind, i)
	own := len(st.c.Issues) // the claim's alias and level issues precede its evidence's
	var f claimValues
	end := st.readClaim(&f, kind, i, c.Path, at)
	c.Claim = trimSpace(f.claim.text())
	if c.Claim == "" && kind == eventKind && f.event.exists() {
		if ev := trimSpace(f.event.text()); ev != "" {
			c.Claim, c.Aliased = ev, true
			st.insertIssue(&own, issue(CodeFieldAlias, interceptors.Info, c.Path,
				`the event claim uses "event" instead of "claim"`, "alias", "event", "field", "claim"))
		}
	}
	c.Level, c.LevelRaw, c.LevelKnown = st.level(&own, c.Path, f.level)
	c.Evidence = f.evidence
	c.NeedsConfirmation = f.confirm
	return end
}

// insertIssue adds is at c.Issues[*at] and advances *at past it.
func (st *parseState) insertIssue(at *int, is interceptors.Issue) {
	st.c.Issues = slices.Insert(st.c.Issues, *at, is)
	*at++
}

// level reads a claim's evidenceLevel; an unknown or missing level's issue is
// inserted at *at.
func (st *parseState) level(at *int, path string, v value) (Level, string, bool) {
	raw := ""
	if v.exists() {
		raw = v.rawText()
		if v.isString() {
			if l, ok := st.p.ParseLevel(v.str); ok {
				return l, raw, true
			}
		}
	}
	msg := "the claim has no evidenceLevel; treated as uncertain"
	if v.exists() {
		msg = fmt.Sprintf("evidenceLevel %q is not one of confirmed, highly likely, possible, uncertain, ruled out; treated as uncertain", raw)
	}
	st.insertIssue(at, issue(CodeUnknownLevel, interceptors.Info, path, msg, "level", raw))
	return Uncertain, raw, false
}

// readScratch holds the buffers a read collects its claims and evidence items in
// before settle copies them into lists of their exact size: their number is
// known only once the walk has read them, and a list allocated for the cap (ten
// unit claims of 184 bytes by default) is mostly empty, bytes the collector pays
// for on every answer. A transient read (ReadIn) leaves the lists in them, and
// its Claims in parsed, until the caller is done with them.
type readScratch struct {
	evidence []Evidence
	units    []UnitClaim
	claims   []Claim
	strs     []string // a transient read's arena (see strArena)
	records  []Record // a transient read's records
	parsed   Claims   // a transient read's result
}

var readScratchPool = sync.Pool{New: func() any { return new(readScratch) }}

// maxScratchEvidence, maxScratchClaims and maxScratchStrings bound the buffers
// kept for reuse.
const (
	maxScratchEvidence = 1024
	maxScratchClaims   = 256
	maxScratchStrings  = 4096
)

// empty clears the buffers (not parsed), dropping their references to the
// answer read (strs in full: an item whose parameters were taken back left some past its
// length).
func (sc *readScratch) empty() {
	clear(sc.evidence)
	clear(sc.units)
	clear(sc.claims)
	clear(sc.strs[:cap(sc.strs)])
	clear(sc.records)
	sc.evidence, sc.units, sc.claims, sc.strs, sc.records = sc.evidence[:0], sc.units[:0], sc.claims[:0], sc.strs[:0], sc.records[:0]
}

// release empties sc and returns it to the pool, unless its buffers grew past
// the bounds.
func (sc *readScratch) release() {
	if cap(sc.evidence) > maxScratchEvidence || cap(sc.units) > maxScratchClaims || cap(sc.claims) > maxScratchClaims || cap(sc.records) > maxScratchClaims || cap(sc.strs) > maxScratchStrings {
		return
	}
	sc.empty()
	sc.parsed = Claims{}
	readScratchPool.Put(sc)
}

// evidenceList reads the evidence of claim i at c.JSON[at]: an array, or a lone
// string as one item. It appends the items to st.evidence and returns them (a
// run of st.evidence, only valid until st.evidence grows: settle uses its
// length only) and the offset just past the value; nil and -1 for another value
// (the walker checks and skips it).
func (st *parseState) evidenceList(kind claimKind, i int, claimPath string, at int) ([]Evidence, int) {
	s := st.c.JSON
	start := len(st.evidence) // the list's first item
	var end int
	switch s[at] {
	case '"':
		end = st.addEvidence(kind, i, claimPath, start, at)
	case '[':
		end = st.w.Elements(at, func(v int) int {
			return st.addEvidence(kind, i, claimPath, start, v)
		})
	default:
		return nil, -1
	}
	if len(st.evidence) == start {
		return nil, end
	}
	return st.evidence[start:len(st.evidence):len(st.evidence)], end
}

// addEvidence reads the evidence item at c.JSON[at], appends it to the list that
// starts at st.evidence[start] and returns the offset just past it.
func (st *parseState) addEvidence(kind claimKind, i int, claimPath string, start, at int) int {
	s := st.c.JSON
	path := st.p.evidencePath(kind, i, claimPath, len(st.evidence)-start)
	var ev Evidence
	var err error
	var end int
	isString := s[at] == '"'
	if isString {
		var text string
		if text, end = st.w.String(at); end < 0 {
			return -1
		}
		ev, err = st.p.parseEvidence(text, st.strArena())
	} else {
		if end = st.w.Value(at); end < 0 {
			return -1
		}
		ev = Evidence{Raw: s[at:end]}
		err = fmt.Errorf("the item is a JSON %s, not a string", jsonType(ev.Raw))
	}
	ev.Path = path
	st.evidence = append(st.evidence, ev)
	if err != nil && (len(st.p.evidence) > 0 || !isString) {
		st.c.Issues = append(st.c.Issues, issue(CodeEvidenceUnstructured, interceptors.Info, path,
			fmt.Sprintf("evidence %q is not structured evidence: %v", ev.Raw, err),
			"evidence", ev.Raw, "reason", err.Error()))
	}
	return end
}

// settle makes the lists of the claims and evidence items read: copies of
// their exact size (one for the event and timeline claims, one for the
// evidence), or for a transient read the scratch buffers themselves. It points
// each claim's Evidence at its run in the evidence list: the walk read the
// arrays in order's order and each array's claims in index order, so the runs
// follow each other in that order with the lengths the claims hold.
func (st *parseState) settle(order *arrayOrder) {
	units, claims, arena := st.units, st.claims, st.evidence
	if !st.transient {
		units, claims, arena = exactCopy(units), exactCopy(claims), exactCopy(arena)
	}
	st.c.UnitClaims = runOf(units, st.runs[unitKind])
	st.c.EventClaims = runOf(claims, st.runs[eventKind])
	st.c.TimelineClaims = runOf(claims, st.runs[timelineKind])
	if len(arena) == 0 {
		return
	}
	take := func(list *[]Evidence) {
		if n := len(*list); n > 0 {
			*list, arena = arena[:n:n], arena[n:]
		}
	}
	for _, kind := range order.kinds[:order.n] {
		switch kind {
		case unitKind:
			for i := range st.c.UnitClaims {
				take(&st.c.UnitClaims[i].Evidence)
			}
		case eventKind:
			for i := range st.c.EventClaims {
				take(&st.c.EventClaims[i].Evidence)
			}
		case timelineKind:
			for i := range st.c.TimelineClaims {
				take(&st.c.TimelineClaims[i].Evidence)
			}
		}
	}
}

// stringList reads an array of strings at c.JSON[at] (a lone string counts as one
// item); blank and non-string items are skipped. It returns the strings and the
// offset just past the value; -1 for a value that is neither (the walker checks
// and skips it).
func (st *parseState) stringList(at int) ([]string, int) {
	s := st.c.JSON
	start := len(st.strs)
	end := -1
	switch s[at] {
	case '"':
		end = st.addString(at)
	case '[':
		end = st.w.Elements(at, func(v int) int {
			if s[v] != '"' {
				return -1 // other items are skipped
			}
			return st.addString(v)
		})
	}
	if len(st.strs) == start {
		return nil, end
	}
	return st.strs[start:len(st.strs):len(st.strs)], end
}

// addString appends the trimmed string at c.JSON[at] to the arena unless it is
// blank, and returns the offset just past it.
func (st *parseState) addString(at int) int {
	str, end := st.w.String(at)
	if str = trimSpace(str); str != "" {
		arena := st.strArena()
		*arena = append(*arena, str)
	}
	return end
}

// unitID reads a usable UnitId: a non-negative integer, a whole-number float, or a
// string of decimal digits.
func unitID(v value) (int64, bool) {
	var s string
	switch {
	case v.isNumber():
		if n, ok := parseDigits(v.raw); ok {
			return n, true
		}
		if n, err := strconv.ParseInt(v.raw, 10, 64); err == nil {
			if n < 0 {
				return 0, false
			}
			return n, true
		}
		f, _ := strconv.ParseFloat(v.raw, 64) // as gjson reads numbers
		if f >= 0 && f < 1<<53 && f == float64(int64(f)) {
			return int64(f), true
		}
		return 0, false
	case v.isString():
		s = trimSpace(v.str)
	default:
		return 0, false
	}
	if s == "" {
		return 0, false
	}
	if n, ok := parseDigits(s); ok {
		return n, true
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

// parseDigits reads s when it is 1 to 18 decimal digits, which no int64
// overflows: strconv.ParseInt(s, 10, 64) without its call and error. It reports
// false for anything else, which the caller leaves to ParseInt.
func parseDigits(s string) (int64, bool) {
	if len(s) == 0 || len(s) > 18 {
		return 0, false
	}
	var n int64
	for i := 0; i < len(s); i++ {
		c := s[i] - '0'
		if c > 9 {
			return 0, false
		}
		n = n*10 + int64(c)
	}
	return n, true
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

// runOf returns the run r of list (capped, so that an append copies it), or nil
// for an empty run.
func runOf[T any](list []T, r claimRun) []T {
	if r.start == r.end {
		return nil
	}
	return list[r.start:r.end:r.end]
}
