package validate

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/factgate/factgate/interceptors"
	"github.com/factgate/factgate/interceptors/facts"
	"github.com/factgate/factgate/knowledge"
)

// DefaultMaxFactsBytes bounds the facts of one offline check (all segments
// together): 16 MiB, the fact extractor's own byte bound and the proxy's default
// request body limit. Larger facts are refused, never truncated: a truncated log
// would report every citation past the cut as not in the replay.
const DefaultMaxFactsBytes = facts.DefaultMaxBytes

// MaxSegments bounds how many segments one offline check takes.
const MaxSegments = 64

// SetSource returns the knowledge set with that name and the pack it belongs to,
// or nil, nil. knowledge.Registry.Set (built-in sets) and knowledge.Library.Set
// (effective sets, with overlays) are SetSources.
type SetSource func(name string) (*knowledge.Set, *knowledge.Pack)

// OfflineOptions configure an Offline checker.
type OfflineOptions struct {
	// Config is the validation config (tolerance, require_claims, facts per issue).
	Config Config
	// MaxFactsBytes bounds the facts of one check; 0 means DefaultMaxFactsBytes.
	MaxFactsBytes int
}

// Offline checks an answer against fact texts outside a chat completion: the one
// code path of `factgate check` and POST /factgate/v1/check. It is immutable after
// NewOffline and safe for concurrent use.
type Offline struct {
	sets     SetSource
	packs    map[string]*offlinePack
	names    []string // the checkable packs, sorted
	maxFacts int
}

type offlinePack struct {
	pack      *knowledge.Pack
	checker   *Checker
	extractor *facts.Extractor
}

// NewOffline prepares offline checks for every pack that has both fact rules and
// a claims contract (the others cannot be checked offline). It fails when no pack
// qualifies or one's rules do not compile.
func NewOffline(packs []*knowledge.Pack, sets SetSource, opt OfflineOptions) (*Offline, error) {
	if sets == nil {
		return nil, fmt.Errorf("validate: offline check needs a knowledge set source")
	}
	o := &Offline{sets: sets, packs: map[string]*offlinePack{}, maxFacts: opt.MaxFactsBytes}
	if o.maxFacts <= 0 {
		o.maxFacts = DefaultMaxFactsBytes
	}
	for _, p := range packs {
		if p == nil || p.Facts == nil || p.Claims == nil {
			continue
		}
		c, err := NewChecker(p, opt.Config)
		if err != nil {
			return nil, err
		}
		// The raw size is checked before extraction; the extractor's own bound only
		// has to stay out of the way.
		x, err := facts.NewExtractor(p.Facts, facts.WithMaxBytes(2*o.maxFacts))
		if err != nil {
			return nil, fmt.Errorf("validate: pack %s: %w", p.Name, err)
		}
		o.packs[p.Name] = &offlinePack{pack: p, checker: c, extractor: x}
		o.names = append(o.names, p.Name)
	}
	if len(o.names) == 0 {
		return nil, fmt.Errorf("validate: no pack has both fact rules and a claims contract to check answers against")
	}
	slices.Sort(o.names)
	return o, nil
}

// MaxFactsBytes returns the bound on one check's facts.
func (o *Offline) MaxFactsBytes() int { return o.maxFacts }

// Packs returns the names of the packs that can be checked offline, sorted.
func (o *Offline) Packs() []string { return o.names }

// CheckRequest is one offline check.
type CheckRequest struct {
	// Facts are the fact texts: one operation log, or the segments of one session
	// in the order they were sent (merged as the proxy merges a session). None
	// means no facts: only the format rules apply.
	Facts []string
	// Answer is the model's whole answer, with its claims block.
	Answer string
	// Pack names the pack. "" means the pack of KnowledgeSet when it is given, else
	// the only pack that can be checked.
	Pack string
	// KnowledgeSet names the set. "" means the one the first segment's header
	// selects, else the pack's default set.
	KnowledgeSet string
	// Scopes replace the header's scope values, per dimension. Values of the
	// players' dimension (factions) go to the players in order: the header's
	// players, else the players in order of first appearance in the log.
	Scopes knowledge.Scopes
	// RequireClaims, when non-nil, replaces the config's require_claims.
	RequireClaims *bool
}

// Report is the result of one offline check.
type Report struct {
	// Issues are the answer's issues, as Checker.Check returns them.
	Issues []interceptors.Issue
	// Pack and KnowledgeSet are what the answer was checked with.
	Pack         string
	KnowledgeSet string
	// Scopes and Players are the resolved request context.
	Scopes  knowledge.Scopes
	Players []knowledge.Player
	// Segments is how many fact texts were merged; Operations how many operations
	// the facts hold; End the end of the facts.
	Segments   int
	Operations int
	End        time.Duration
	// Records counts the JSON records the facts hold (facts.records), over
	// RecordSets, the sets that hold some.
	Records    int
	RecordSets []string

	playersDim string // shown through Players, not Scopes
}

// Check runs one offline check. Errors are *interceptors.Error: 413 when the facts
// exceed the bound (named in the message), 400 for an unknown pack or knowledge
// set, a set of another pack, or too many segments.
func (o *Offline) Check(req CheckRequest) (*Report, error) {
	if len(req.Facts) > MaxSegments {
		return nil, interceptors.Errorf(400, "invalid_request_error", "too_many_segments",
			"%d fact segments; at most %d are checked together", len(req.Facts), MaxSegments)
	}
	size := 0
	for _, f := range req.Facts {
		size += len(f)
	}
	if size > o.maxFacts {
		return nil, o.tooLarge(fmt.Sprintf("the facts are %d bytes", size))
	}
	op, err := o.choosePack(req)
	if err != nil {
		return nil, err
	}
	var ctx knowledge.Extracted
	if len(req.Facts) > 0 {
		ctx = knowledge.ExtractContextTexts(op.pack, req.Facts[:1])
	}
	set, err := o.chooseSet(op, req.KnowledgeSet, ctx.KnowledgeSet)
	if err != nil {
		return nil, err
	}
	rep := &Report{Pack: op.pack.Name, KnowledgeSet: set.name, Segments: len(req.Facts), playersDim: op.checker.dim}
	idx := make([]*facts.Index, 0, len(req.Facts))
	for i, text := range req.Facts {
		ix, err := op.extractor.ExtractFile(text)
		if err != nil {
			return nil, fmt.Errorf("validate: extracting facts: %w", err)
		}
		if ix.Truncated() {
			return nil, o.tooLarge(fmt.Sprintf("segment %d has more lines than the pack's fact rules read", i+1))
		}
		idx = append(idx, ix)
	}
	var ix *facts.Index
	if len(idx) > 0 {
		ix = facts.Merge(idx...)
	}
	rep.Operations, rep.End = ix.Len(), ix.End()
	rep.Records, rep.RecordSets = ix.RecordCount(), ix.RecordSets()
	rep.Scopes, rep.Players = resolveScopes(op.checker.dim, ctx, req.Scopes, ix)
	rep.Issues = op.checker.Check(req.Answer, Input{
		Index:         ix,
		Set:           set.set,
		Players:       rep.Players,
		Scopes:        rep.Scopes,
		RequireClaims: req.RequireClaims,
	})
	return rep, nil
}

func (o *Offline) tooLarge(what string) error {
	return interceptors.Errorf(413, "invalid_request_error", "facts_too_large",
		"%s; the limit is %d bytes (%d MiB) for all segments together: split the log or check a part of it", what, o.maxFacts, o.maxFacts>>20)
}

type chosenSet struct {
	name string
	set  *knowledge.Set
}

func badRequest(code, format string, args ...any) error {
	return interceptors.Errorf(400, "invalid_request_error", code, format, args...)
}

// choosePack picks the pack of a request: the one named, else the one of the
// named knowledge set, else the only one that can be checked.
func (o *Offline) choosePack(req CheckRequest) (*offlinePack, error) {
	switch {
	case req.Pack != "":
		if op := o.packs[req.Pack]; op != nil {
			return op, nil
		}
		return nil, badRequest("unknown_pack", "no pack %q checks answers (have %s)", req.Pack, strings.Join(o.names, ", "))
	case req.KnowledgeSet != "":
		_, p := o.sets(req.KnowledgeSet)
		if p == nil {
			return nil, badRequest("unknown_knowledge_set", "unknown knowledge set %q", req.KnowledgeSet)
		}
		if op := o.packs[p.Name]; op != nil {
			return op, nil
		}
		return nil, badRequest("unknown_pack", "knowledge set %q belongs to pack %s, which has no fact rules or claims contract to check", req.KnowledgeSet, p.Name)
	case len(o.names) == 1:
		return o.packs[o.names[0]], nil
	}
	// Facts that are JSON go to the one pack that reads records; any other facts
	// (or none) to the one pack that reads operation logs.
	jsonFacts := len(req.Facts) > 0 && facts.HasJSONDocument(req.Facts[0])
	var fits []string
	for _, name := range o.names {
		if x := o.packs[name].extractor; x != nil && (x.HasRecords() == jsonFacts) {
			fits = append(fits, name)
		}
	}
	if len(fits) == 1 {
		return o.packs[fits[0]], nil
	}
	return nil, badRequest("ambiguous_pack", "several packs check answers (%s): name one", strings.Join(o.names, ", "))
}

// chooseSet picks the knowledge set: the one named, else the one the header
// selects, else the pack's default. A pack without sets checks without one.
func (o *Offline) chooseSet(op *offlinePack, named, fromHeader string) (chosenSet, error) {
	name := firstNonEmpty(named, fromHeader, op.pack.DefaultSet)
	if name == "" {
		return chosenSet{}, nil
	}
	set, p := o.sets(name)
	if set == nil {
		return chosenSet{}, badRequest("unknown_knowledge_set", "unknown knowledge set %q (pack %s has %s)", name, op.pack.Name, strings.Join(op.pack.SetNames(), ", "))
	}
	if p != nil && p.Name != op.pack.Name {
		return chosenSet{}, badRequest("knowledge_set_mismatch", "knowledge set %q belongs to pack %s, not %s", name, p.Name, op.pack.Name)
	}
	return chosenSet{name: name, set: set}, nil
}

// resolveScopes applies the request's scope values over the header's. Values of
// the players' dimension are given to the players in order (the header's players,
// else the log's in order of first appearance).
func resolveScopes(dim string, ctx knowledge.Extracted, over knowledge.Scopes, ix *facts.Index) (knowledge.Scopes, []knowledge.Player) {
	scopes := knowledge.Scopes{}
	for d, vs := range ctx.Scopes {
		scopes[d] = slices.Clone(vs)
	}
	players := slices.Clone(ctx.Players)
	for d, vs := range over {
		scopes[d] = slices.Clone(vs)
		if d != dim || dim == "" {
			continue
		}
		if len(players) == 0 {
			for _, name := range ix.Players() {
				players = append(players, knowledge.Player{Name: name})
			}
		}
		for i := range players {
			players[i].Scope = ""
			if i < len(vs) {
				players[i].Scope = vs[i]
			}
		}
	}
	if len(scopes) == 0 {
		scopes = nil
	}
	return scopes, players
}

// sortedDims returns the dimensions of scopes, sorted (for stable output).
func sortedDims(s knowledge.Scopes) []string {
	return slices.Sorted(maps.Keys(s))
}
