package validate

// The Go rules the ra3 pack's rules.yaml re-expresses in CEL, kept only as the
// reference of the differential test (engine_diff_test.go): the production path
// runs the engine.

import (
	"slices"
	"strconv"
	"strings"

	"github.com/factgate/factgate/interceptors"
	"github.com/factgate/factgate/interceptors/claims"
	"github.com/factgate/factgate/interceptors/facts"
	"github.com/factgate/factgate/knowledge"
)

// The levels recommendations name (canonical spellings claims.ParseLevel reads).
var (
	levelPossible  = claims.Possible.String()
	levelUncertain = claims.Uncertain.String()
	levelRuledOut  = claims.RuledOut.String()
)

// The knowledge tag that marks an asset able to build structures. Identity rules
// ask the knowledge set for it (and for knowledge.SpecialPowerTag(power)); no asset
// name appears in code.
const builderTag = "builder"

// refRun is a run with the reference rules' own state.
type refRun struct {
	*run
	matched []bool // per evidence item of the current claim: it matched the facts
}

// referenceRules runs the reference rules on every claim, as the checker did
// before the engine.
func referenceRules(r *run, parsed *claims.Claims) {
	rr := &refRun{run: r}
	for i := range parsed.UnitClaims {
		rr.unitClaim(&parsed.UnitClaims[i])
	}
	for i := range parsed.EventClaims {
		rr.claim(&parsed.EventClaims[i])
	}
	for i := range parsed.TimelineClaims {
		rr.claim(&parsed.TimelineClaims[i])
	}
}

// unitClaim applies every rule to one unit claim: its evidence items first (one
// issue per item), then the claim-level rules.
func (r *refRun) unitClaim(u *claims.UnitClaim) {
	r.evidenceItems(u.Evidence)
	confident := u.Level.AtLeastHighlyLikely()
	if confident && len(u.Evidence) == 0 {
		r.add(finding{issue: newIssue(CodeNoEvidence, interceptors.WeakEvidence, u.Path,
			interceptors.Recommendation{EvidenceLevel: levelPossible},
			"claim", u.Claim, "level", u.Level.String(), "unit", unitText(u)),
			units: unitList(u)})
	}
	if u.Level.Hedged() && len(u.Alternatives) == 0 && len(u.NeedsConfirmation) == 0 {
		r.add(finding{issue: newIssue(CodeNoAlternatives, interceptors.Warning, u.Path,
			interceptors.Recommendation{},
			"unit", unitText(u), "claim", u.Claim, "level", u.Level.String()),
			units: unitList(u)})
	}
	if !u.HasUnitID {
		return
	}
	id := u.UnitID // its text, unitText(u), is made only for an issue
	var owners []string
	var unit facts.Unit
	if r.hasFacts {
		unit = r.unit(id)
		owners = unit.Players()
		if !unit.Observed() {
			// No level makes a claim about a UnitId the facts never show honest:
			// the claim goes.
			r.add(finding{issue: newIssue(CodeUnitNotObserved, interceptors.Warning, u.Path,
				interceptors.Recommendation{Remove: true},
				"unit", unitText(u), "player", u.Player, "claim", u.Claim),
				assets: nonEmpty(u.Claim)})
		}
		if u.Player != "" {
			known := r.knownPlayer(u.Player)
			if !known || (len(owners) > 0 && !slices.Contains(owners, u.Player)) {
				owner := ""
				if known {
					owner = strings.Join(owners, r.c.sep)
				}
				rec := interceptors.Recommendation{EvidenceLevel: levelUncertain}
				if len(owners) == 1 {
					// The facts name one owner: the claim can name it.
					rec.Player = owners[0]
				}
				r.add(finding{issue: newIssue(CodePlayerMismatch, interceptors.Contradiction, u.Path,
					rec,
					"unit", unitText(u), "player", u.Player, "owner", owner, "claim", u.Claim),
					units: []int64{id}})
			}
		}
	}
	if u.Claim == "" {
		return
	}
	// The player whose faction and productions the identity rules look at: the one
	// the claim names, else the one on whose lines the unit appears.
	player := u.Player
	if player == "" && len(owners) == 1 {
		player = owners[0]
	}
	scope := r.scopeOf(player)
	sc := r.view(scope)
	judged := sc.Exists()
	entry := sc.Entry(u.Claim) // the claimed asset in the player's faction, nil when unknown
	known := entry != nil
	if judged && !known {
		// Nor one about an asset the knowledge does not know.
		r.add(finding{issue: newIssue(CodeAssetUnknown, interceptors.Warning, u.Path,
			interceptors.Recommendation{Remove: true},
			"asset", u.Claim, "player", player, "scope", scope, "unit", unitText(u)),
			units: []int64{id}})
	}
	ruledOut := u.Level.RulesOut()
	if r.hasFacts && known && !ruledOut {
		r.powerMismatch(u, unit, scope, sc, entry)
	}
	if r.hasFacts && !ruledOut && player != "" {
		r.beforeProduction(u, unit, player)
	}
	if !confident || !r.hasFacts {
		return
	}
	if r.isBuilder(u.Claim, entry, judged) && !unit.ActedAs(facts.RoleBuilder) {
		r.add(finding{issue: newIssue(CodeBuilderNotObserved, interceptors.WeakEvidence, u.Path,
			interceptors.Recommendation{EvidenceLevel: levelPossible},
			"unit", unitText(u), "asset", u.Claim, "player", player),
			units: []int64{id}})
	}
	if known {
		r.ambiguous(u, id, sc)
	}
}

// claim applies the rules of event and timeline claims: their evidence items and
// claim.no_evidence.
func (r *refRun) claim(c *claims.Claim) {
	r.evidenceItems(c.Evidence)
	if c.Level.AtLeastHighlyLikely() && len(c.Evidence) == 0 {
		r.add(finding{issue: newIssue(CodeNoEvidence, interceptors.WeakEvidence, c.Path,
			interceptors.Recommendation{EvidenceLevel: levelPossible},
			"claim", c.Claim, "level", c.Level.String())})
	}
}

// evidenceItems checks each structured item against the facts — at every level: a
// false citation is false whatever the claim concludes — and records in r.matched
// which items matched. One issue per item, the first that applies:
// evidence.out_of_range, power.not_used, evidence.not_in_replay.
func (r *refRun) evidenceItems(items []claims.Evidence) {
	r.matched = r.matched[:0]
	for i := range items {
		r.matched = append(r.matched, r.evidenceItem(&items[i]))
	}
}

func (r *refRun) evidenceItem(ev *claims.Evidence) bool {
	if !ev.Structured || !r.hasFacts {
		return false
	}
	kind := r.ix.Kind(ev.Type) // one lookup of the type for the questions below
	fields, _ := kind.EvidenceFields()
	rec := interceptors.Recommendation{EvidenceLevel: levelUncertain}
	if ev.Time-r.end > r.tol {
		r.addItem(ev, fields, newIssue(CodeOutOfRange, interceptors.Contradiction, ev.Path, rec,
			"evidence", ev.Raw, "type", ev.Type, "time", interceptors.FormatClock(ev.Time), "end", interceptors.FormatClock(r.end)))
		return false
	}
	if kind.HasRole(facts.RolePower) {
		unit, uok := unitParam(ev, fields)
		power := param(ev, fields, fieldPower)
		if uok && power != "" && !r.unit(unit).UsedPower(power) {
			r.addItem(ev, fields, newIssue(CodePowerNotUsed, interceptors.Contradiction, ev.Path, rec,
				"unit", strconv.FormatInt(unit, 10), "power", power, "evidence", ev.Raw,
				"used", strings.Join(r.ix.UnitPowers(unit), r.c.sep), "time", interceptors.FormatClock(ev.Time)))
			return false
		}
	}
	if e := (facts.Evidence{Type: ev.Type, At: ev.Time, Params: ev.Params}); !kind.Matches(e, r.tol) {
		// What the facts have instead (the same operation at another time, another
		// at that time, the unit's of that kind): the reader and the model are told.
		args := []string{"evidence", ev.Raw, "type", ev.Type, "time", interceptors.FormatClock(ev.Time)}
		if op, ok := kind.Nearest(e, r.tol); ok {
			args = append(args, "actual", op.Text)
		}
		r.addItem(ev, fields, newIssue(CodeNotInReplay, interceptors.Contradiction, ev.Path, rec, args...))
		return false
	}
	return true
}

// addItem adds an evidence item's issue; its related facts are about the units,
// assets and powers the item names.
func (r *refRun) addItem(ev *claims.Evidence, fields []string, is interceptors.Issue) {
	f := finding{issue: is}
	f.units, f.assets, f.powers = itemSubjects(ev, fields)
	r.add(f)
}

// powerMismatch: the unit used a power that some asset of the player's faction
// carries and the claimed asset does not. Knowledge of other factions is never
// consulted, so an incomplete faction cannot produce a false Contradiction.
//
// unit is the claimed unit in the facts, sc the faction (scope) in the set and
// claimed the claimed asset's entry there.
func (r *refRun) powerMismatch(u *claims.UnitClaim, unit facts.Unit, scope string, sc knowledge.ScopeView, claimed *knowledge.Entry) {
	id := u.UnitID
	for _, power := range unit.Powers() {
		var buf powerTagBuf
		tag := buf.tag(power)
		carriers := sc.AssetsWithTag(tag)
		if len(carriers) == 0 || claimed.HasTag(tag) {
			continue
		}
		r.add(finding{issue: newIssue(CodePowerMismatch, interceptors.Contradiction, u.Path,
			interceptors.Recommendation{EvidenceLevel: levelRuledOut, Alternatives: slices.Clone(carriers)},
			"unit", unitText(u), "asset", u.Claim, "power", power, "alternatives", strings.Join(carriers, r.c.sep), "scope", scope),
			units: []int64{id}, powers: []string{power}})
		return
	}
}

// beforeProduction: the player produced the claimed asset (producer operations;
// structures are built, not produced), and the unit was observed strictly before
// the first such production. unit is the claimed unit in the facts.
func (r *refRun) beforeProduction(u *claims.UnitClaim, unit facts.Unit, player string) {
	id := u.UnitID
	produced, ok := r.ix.FirstProduction(player, u.Claim)
	if !ok {
		return
	}
	first, ok := unit.FirstObserved()
	if !ok || first >= produced {
		return
	}
	r.add(finding{issue: newIssue(CodeBeforeProduction, interceptors.Contradiction, u.Path,
		interceptors.Recommendation{EvidenceLevel: levelRuledOut},
		"unit", unitText(u), "asset", u.Claim, "player", player,
		"time", interceptors.FormatClock(first), "produced", interceptors.FormatClock(produced)),
		units: []int64{id}, assets: []string{u.Claim}})
}

// isBuilder reports whether the claimed asset carries the builder tag: in the
// player's faction when it is known (judged; claimed is the asset's entry there,
// nil when the faction has none), else in any scope of the set.
func (r *refRun) isBuilder(asset string, claimed *knowledge.Entry, judged bool) bool {
	if r.set == nil {
		return false
	}
	if judged {
		return claimed != nil && claimed.HasTag(builderTag)
	}
	for _, e := range r.set.Lookup(asset) {
		if e.Entry.HasTag(builderTag) {
			return true
		}
	}
	return false
}

// ambiguous: among the evidence items about the claimed unit itself that matched
// the facts, one is a power that two or more assets of the faction carry (the
// claimed asset among them — otherwise asset.power_mismatch speaks), and none
// identifies the unit (it built, placed, produced or was sold).
func (r *refRun) ambiguous(u *claims.UnitClaim, id int64, sc knowledge.ScopeView) {
	var shared string
	var carriers []string
	for i := range u.Evidence {
		ev := &u.Evidence[i]
		if !r.matched[i] {
			continue
		}
		kind := r.ix.Kind(ev.Type)
		fields, _ := kind.EvidenceFields()
		if n, ok := unitParam(ev, fields); !ok || n != id {
			continue
		}
		if kind.HasRole(facts.RoleBuilder) || kind.HasRole(facts.RoleProducer) || kind.HasRole(facts.RoleSell) {
			return
		}
		if shared != "" || !kind.HasRole(facts.RolePower) {
			continue
		}
		power := param(ev, fields, fieldPower)
		if power == "" {
			continue
		}
		var buf powerTagBuf
		cs := sc.AssetsWithTag(buf.tag(power))
		if len(cs) >= 2 && slices.Contains(cs, u.Claim) {
			shared, carriers = power, cs
		}
	}
	if shared == "" {
		return
	}
	others := make([]string, 0, len(carriers)-1)
	for _, a := range carriers {
		if a != u.Claim {
			others = append(others, a)
		}
	}
	r.add(finding{issue: newIssue(CodeAmbiguous, interceptors.WeakEvidence, u.Path,
		interceptors.Recommendation{EvidenceLevel: levelPossible, Alternatives: others},
		"unit", unitText(u), "asset", u.Claim, "power", shared, "level", u.Level.String(),
		"alternatives", strings.Join(others, r.c.sep)),
		units: []int64{id}, powers: []string{shared}})
}

func unitText(u *claims.UnitClaim) string {
	if u.HasUnitID {
		return strconv.FormatInt(u.UnitID, 10)
	}
	return u.UnitIDRaw
}

func unitList(u *claims.UnitClaim) []int64 {
	if u.HasUnitID {
		return []int64{u.UnitID}
	}
	return nil
}

func nonEmpty(s string) []string {
	if s == "" {
		return nil
	}
	return []string{s}
}
