package validate

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/factgate/factgate/interceptors"
	"github.com/factgate/factgate/interceptors/claims"
	"github.com/factgate/factgate/interceptors/facts"
	"github.com/factgate/factgate/knowledge"
)

// ValidatorName is the Validator of the issues the rules of this package report
// (the claims parser's format issues keep "claims").
const ValidatorName = "validate"

// The issue codes this package's rules report (PRODUCT.md §8). The format codes
// (claims.*, evidence.unstructured, unit.missing_*) come from package claims.
const (
	CodeNoEvidence         = "claim.no_evidence"
	CodeNoAlternatives     = "claim.no_alternatives"
	CodeUnitNotObserved    = "unit.not_observed"
	CodeNotInReplay        = "evidence.not_in_replay"
	CodeOutOfRange         = "evidence.out_of_range"
	CodePowerNotUsed       = "power.not_used"
	CodePlayerMismatch     = "player.mismatch"
	CodeAssetUnknown       = "asset.unknown"
	CodePowerMismatch      = "asset.power_mismatch"
	CodeBuilderNotObserved = "builder.not_observed"
	CodeAmbiguous          = "evidence.ambiguous"
	CodeBeforeProduction   = "timeline.before_production"
	// CodeSegmentsMissing: the request belongs to a session and some of its
	// segments' fact indexes are gone from every cache tier, so the facts are
	// partial; the rules that need facts do not run (a citation of a lost segment
	// would otherwise be "not in the replay").
	CodeSegmentsMissing = "facts.segments_missing"
	// CodeSessionUnconfirmed: the request belongs to a session whose list of
	// segments could not be read from the shared cache (Redis failing), so the
	// segments other replicas added may be missing from the facts; the rules that
	// need facts do not run, as for CodeSegmentsMissing.
	CodeSessionUnconfirmed = "facts.session_unconfirmed"
)

// Input is what one answer is checked against. The zero Input has no facts and no
// knowledge: only the format and self-consistency rules apply.
type Input struct {
	// Index is the fact index of the request, or of the session's merged segments.
	// Nil, or an index without operations (no rule matched the text), means no
	// facts: the rules that need facts do not fire.
	Index *facts.Index
	// Set is the knowledge set the request resolved to. Nil means no knowledge: the
	// rules that ask the set by tag (asset.unknown, asset.power_mismatch,
	// builder.not_observed, evidence.ambiguous) do not fire.
	Set *knowledge.Set
	// Players are the request's players in order, each with its value in the
	// pack's players dimension (the faction). A player missing here has no scope,
	// so the rules judged within a player's faction do not apply to it.
	Players []knowledge.Player
	// Scopes are the request's scope values per dimension. When the players
	// dimension names exactly one value, every player of the replay without a
	// scope of its own gets it (everyone plays that faction). Nil: none.
	Scopes knowledge.Scopes
	// RequireClaims, when non-nil, replaces the checker's require_claims for this
	// answer.
	RequireClaims *bool
	// MissingSegments counts the session segments whose facts are gone from every
	// cache tier. When it is not zero the facts are partial: Index is ignored (the
	// rules that need facts do not fire) and one Warning, facts.segments_missing,
	// says so.
	MissingSegments int
	// SessionUnconfirmed is set when the session's list of segments could not be
	// read from the shared cache: the facts may be partial. Index is ignored and
	// one Warning, facts.session_unconfirmed, says so.
	SessionUnconfirmed bool
	// Locations, when non-nil, is the request's memory of where its answers'
	// claims blocks are: Check reuses and records there (see claims.Locations).
	Locations *claims.Locations
}

// Checker checks answers under one pack: the claims parser's format issues plus
// every deterministic rule of PRODUCT.md §8 except revision.leak and semantic.*.
// It is immutable after NewChecker and safe for concurrent use; Check is pure and
// deterministic and never modifies the answer.
type Checker struct {
	pack     *knowledge.Pack
	parser   *claims.Parser
	settings Settings
	// dim is the players' scope dimension ("factions"); "" when the pack reads no
	// players, so no player has a scope.
	dim string
	// sep joins lists in issue arguments ("、" for a zh pack).
	sep string
	// rules runs the pack's rules (rules.yaml) on the claims.
	rules *engine
	// reference, when set (by the differential test only), runs instead of the
	// engine.
	reference func(*run, *claims.Claims)
}

// NewChecker builds a checker for pack with cfg. It fails for a nil pack, a pack
// without a claims contract (there is nothing to check), an invalid cfg, or a
// contract the claims parser rejects.
func NewChecker(pack *knowledge.Pack, cfg Config) (*Checker, error) {
	if pack == nil {
		return nil, errors.New("validate: no pack")
	}
	if pack.Claims == nil {
		return nil, fmt.Errorf("validate: pack %s has no claims contract to check answers against", pack.Name)
	}
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("validate: %w", err)
	}
	var evidence map[string][]string
	if pack.Facts != nil {
		evidence = pack.Facts.Evidence
	}
	p, err := claims.NewParser(pack.Claims, evidence)
	if err != nil {
		return nil, fmt.Errorf("validate: pack %s: %w", pack.Name, err)
	}
	c := &Checker{pack: pack, parser: p, settings: cfg.Settings(), sep: ", "}
	if c.rules, err = newEngine(pack); err != nil {
		return nil, fmt.Errorf("validate: pack %s: %w", pack.Name, err)
	}
	if pack.Context.Players != nil {
		c.dim = pack.Context.Players.Dimension
	}
	if strings.HasPrefix(strings.ToLower(pack.Language), "zh") {
		c.sep = "、"
	}
	return c, nil
}

// Pack returns the checker's pack.
func (c *Checker) Pack() *knowledge.Pack { return c.pack }

// Parser returns the claims parser the checker uses (the revision step strips and
// downgrades with it).
func (c *Checker) Parser() *claims.Parser { return c.parser }

// Settings returns the checker's settings, defaults applied.
func (c *Checker) Settings() Settings { return c.settings }

// Check returns the issues of answer against in, sorted by path in claim order
// (the root first, then unitClaims, eventClaims, timelineClaims; within an array
// the array itself, then each claim followed by its evidence items), then by code.
// Each issue carries its message and recommendation in the pack's language (English
// where the pack has no template) and at most MaxFactsPerIssue related facts.
func (c *Checker) Check(answer string, in Input) []interceptors.Issue {
	req := claims.Optional
	if (in.RequireClaims == nil && c.settings.RequireClaims) || (in.RequireClaims != nil && *in.RequireClaims) {
		req = claims.Required
	}
	if in.MissingSegments > 0 || in.SessionUnconfirmed {
		in.Index = nil // partial facts would make true citations "not in the replay"
	}
	// The claims are only read while the rules run, so they stay in the parser's
	// reused buffers (the issues copy what they keep: strings, fresh lists).
	// Lifetime: c and its lists only inside use; the parser's scratch is reused after (docs/architecture.md, Lifetimes).
	var issues []interceptors.Issue
	c.parser.ReadIn(in.Locations, answer, req, func(parsed *claims.Claims) {
		issues = c.check(parsed, in)
	})
	return issues
}

// check runs the rules on the parsed answer.
func (c *Checker) check(parsed *claims.Claims, in Input) []interceptors.Issue {
	// The run lives in an instance of the rule engine (taken for this check,
	// returned after): the engine's functions read it, and it costs no
	// allocation.
	ei := c.rules.get()
	defer c.rules.put(ei)
	r := &ei.run
	out := r.out[:0]
	*r = newRun(c, in)
	r.out = out
	for _, is := range parsed.Issues {
		r.out = append(r.out, finding{issue: is})
	}
	if in.MissingSegments > 0 {
		r.add(finding{issue: newIssue(CodeSegmentsMissing, interceptors.Warning, "", interceptors.Recommendation{},
			"missing", strconv.Itoa(in.MissingSegments))})
	}
	if in.SessionUnconfirmed {
		r.add(finding{issue: newIssue(CodeSessionUnconfirmed, interceptors.Warning, "", interceptors.Recommendation{})})
	}
	if parsed.Usable() {
		if c.reference != nil {
			c.reference(r, parsed)
		} else {
			ei.runClaims(parsed)
		}
		ei.runRecords(parsed)
	}
	return r.finish()
}

// finding is an issue on its way out, with what its related facts are about.
type finding struct {
	issue  interceptors.Issue
	units  []int64
	assets []string
	powers []string
	key    pathKey
}

// run is the state of one Check call.
type run struct {
	c        *Checker
	ix       *facts.Index
	hasFacts bool
	set      *knowledge.Set
	tol      time.Duration
	end      time.Duration
	players  []knowledge.Player
	sole     string // the one scope value of the players' dimension, if exactly one
	out      []finding
	// views are the last two scopes view looked up in set: a request's unit
	// claims are about one or two factions, and the set's scope map hashes two
	// strings. next is the slot the next lookup takes.
	views    [2]scopeView
	nextView int
	lastUnit unitView // the last UnitId unit looked up
}

// unitView is a UnitId looked up in the facts.
type unitView struct {
	id   int64
	unit facts.Unit
	ok   bool // the view holds a lookup
}

// scopeView is a scope of the players' dimension looked up in the set.
type scopeView struct {
	scope string
	view  knowledge.ScopeView
	ok    bool // the slot holds a lookup
}

func newRun(c *Checker, in Input) run {
	r := run{
		c:        c,
		ix:       in.Index,
		hasFacts: in.Index.HasFacts(),
		set:      in.Set,
		tol:      c.settings.TimeTolerance,
		players:  in.Players,
	}
	if r.hasFacts {
		r.end = in.Index.End()
	}
	if c.dim != "" {
		if vs := in.Scopes[c.dim]; len(vs) == 1 {
			r.sole = vs[0]
		}
	}
	return r
}

// knownPlayer reports whether name is a player of the replay: on the players
// list or on some operation line.
func (r *run) knownPlayer(name string) bool {
	for _, p := range r.players {
		if p.Name == name {
			return true
		}
	}
	return r.ix.HasPlayer(name)
}

// scopeOf returns the player's value in the players dimension (its faction), or ""
// when the player is not in the replay or its scope is unknown.
func (r *run) scopeOf(name string) string {
	if name == "" || r.c.dim == "" {
		return ""
	}
	for _, p := range r.players {
		if p.Name == name && p.Scope != "" {
			return p.Scope
		}
	}
	if r.sole != "" && r.knownPlayer(name) {
		return r.sole
	}
	return ""
}

func (r *run) add(f finding) { r.out = append(r.out, f) }

// finish sorts the findings and renders their texts and related facts.
func (r *run) finish() []interceptors.Issue {
	if len(r.out) == 0 {
		return nil
	}
	for i := range r.out {
		r.out[i].key = parsePathKey(r.out[i].issue.Path)
	}
	slices.SortStableFunc(r.out, func(a, b finding) int {
		if c := a.key.compare(b.key); c != 0 {
			return c
		}
		return strings.Compare(a.issue.Code, b.issue.Code)
	})
	issues := make([]interceptors.Issue, len(r.out))
	defer clear(r.out) // the findings' memory is reused by the next check
	for i := range r.out {
		f := &r.out[i]
		is := f.issue
		r.c.render(&is)
		if r.hasFacts && (len(f.units) > 0 || len(f.assets) > 0 || len(f.powers) > 0) {
			is.Facts, _ = r.ix.Relevant(f.units, f.assets, f.powers, r.c.settings.MaxFactsPerIssue)
		}
		issues[i] = is
	}
	return issues
}

// newIssue builds one of this package's issues; args are key/value pairs.
func newIssue(code string, sev interceptors.Severity, path string, rec interceptors.Recommendation, args ...string) interceptors.Issue {
	is := interceptors.Issue{Code: code, Severity: sev, Path: path, Validator: ValidatorName, Recommendation: rec}
	if len(args) > 0 {
		is.Args = make(map[string]string, len(args)/2)
		for i := 0; i+1 < len(args); i += 2 {
			is.Args[args[i]] = args[i+1]
		}
	}
	return is
}
