package facts

import (
	"slices"
	"strings"
	"time"
)

// Op is one operation: a line of the log that an op rule matched.
type Op struct {
	// Kind is the rule's op name ("build", "select").
	Kind string
	// At is the game-clock time of the operation.
	At time.Duration
	// Player is the "player" group ("" when the rule has none).
	Player string
	// Asset is the "asset" group: what was built, placed or produced ("" = none).
	Asset string
	// Power is the "power" group: the special power used ("" = none).
	Power string
	// Units are the UnitIds the line names — the "unit" group, then each UnitId of
	// the "units" group — in line order. nil when the line names none (a move).
	Units []int64
	// Pos is the "pos" group as numbers; meaningful only when HasPos.
	Pos [3]float64
	// Line is the 1-based line number in the source texts taken as one text (for a
	// merged index: in the segments taken as one text, in order).
	Line int
	// Text is the source line, trimmed: what a "relevant facts" excerpt shows.
	Text string
	// HasPos reports whether the line has a "pos" group (a placement, a move).
	HasPos bool

	kind int32 // index into the owning Index's schema kinds
}

// span is a [start, end) byte range of an index's text (or, during extraction, of
// the line arena that becomes it).
type span struct{ start, end int32 }

// opRec is an operation as an index stores it. It holds no pointers — its strings
// are spans of the index's text, its UnitIds a range of the index's units — so
// that a memory tier full of indexes costs the garbage collector almost nothing to
// scan: with Op values (five strings and a slice each) 256 MiB of indexes were
// 160 MB of pointers to trace on every cycle.
type opRec struct {
	at                         time.Duration
	pos                        [3]float64
	line                       int
	text, player, asset, power span
	unitsStart, unitsEnd       int32
	kind                       int32
	hasPos                     bool
}

// Index is the fact index of one request (or one session's merged segments): the
// operations in time order and everything validators ask about them, precomputed.
//
// An Index is immutable and safe for concurrent use. Slices it returns are shared
// with it and must not be modified; *Op values are the caller's. A nil *Index is an
// empty index: it has no facts and every lookup reports "not found".
type Index struct {
	recs []opRec
	// text holds every string of the operations (the recs' spans): the extracted
	// lines, or the decoded blob.
	text string
	// units holds every operation's UnitIds (the recs' ranges).
	units     []int64
	schema    *schema
	stated    time.Duration
	hasStated bool
	lines     int
	unparsed  int
	truncated bool

	// Derived by derive(), never encoded.
	byKind     [][]int32 // kind id -> op indexes, time order
	players    []string  // in order of first appearance (line order)
	playerSlot map[string]int32
	playerOps  [][]int32 // slot -> op indexes, time order
	unitSlot   map[int64]int32
	unitIDs    []int64 // slot -> UnitId
	unitStart  []int32 // slot -> start in unitOps; len = slots+1
	unitOps    []int32 // op indexes per unit slot, time order
	firstProd  map[playerAsset]time.Duration
	byAsset    map[string][]int32
	byPower    map[string][]int32
}

type playerAsset struct{ player, asset string }

// schema is what the rules say about operation kinds, carried by every index so
// that a decoded or merged index answers role and evidence lookups on its own.
type schema struct {
	kinds  []kindInfo
	byFold map[string]int // lower-case kind name -> id
}

type kindInfo struct {
	name  string
	roles roleSet
	// evidence lists the op fields the evidence type's parameters compare with;
	// meaningful only when hasEvidence.
	evidence    []string
	hasEvidence bool
}

func (sc *schema) finish() {
	sc.byFold = make(map[string]int, len(sc.kinds))
	for i, k := range sc.kinds {
		sc.byFold[strings.ToLower(k.name)] = i
	}
}

// kindID finds a kind by name in any case.
func (sc *schema) kindID(name string) (int, bool) {
	if sc == nil {
		return 0, false
	}
	if id, ok := sc.byFold[name]; ok {
		return id, true
	}
	id, ok := sc.byFold[strings.ToLower(name)]
	return id, ok
}

func (ix *Index) roles(r *opRec) roleSet { return ix.schema.kinds[r.kind].roles }

// str returns the string a span of the index's text holds.
func (ix *Index) str(s span) string { return ix.text[s.start:s.end] }

// recUnits returns the UnitIds of r (nil when it names none), shared with the index.
func (ix *Index) recUnits(r *opRec) []int64 {
	if r.unitsEnd <= r.unitsStart {
		return nil
	}
	return ix.units[r.unitsStart:r.unitsEnd:r.unitsEnd]
}

// op returns operation i as an Op; its strings and Units are shared with the index.
func (ix *Index) op(i int32) Op {
	r := &ix.recs[i]
	return Op{
		Kind:   ix.schema.kinds[r.kind].name,
		At:     r.at,
		Player: ix.str(r.player),
		Asset:  ix.str(r.asset),
		Power:  ix.str(r.power),
		Units:  ix.recUnits(r),
		Pos:    r.pos,
		Line:   r.line,
		Text:   ix.str(r.text),
		HasPos: r.hasPos,
		kind:   r.kind,
	}
}

// opPtr returns operation i as a new *Op.
func (ix *Index) opPtr(i int32) *Op {
	op := ix.op(i)
	return &op
}

// opsAt returns the operations with the given indexes as new *Op values.
func (ix *Index) opsAt(list []int32) []*Op {
	if len(list) == 0 {
		return nil
	}
	ops := make([]Op, len(list))
	out := make([]*Op, len(list))
	for k, i := range list {
		ops[k] = ix.op(i)
		out[k] = &ops[k]
	}
	return out
}

// derive builds the lookup structures from recs (sorted) and schema.
func (ix *Index) derive() {
	ops := ix.recs
	nk := len(ix.schema.kinds)

	// Per kind.
	kindCount := make([]int, nk)
	for i := range ops {
		kindCount[ops[i].kind]++
	}
	kindBacking := make([]int32, len(ops))
	ix.byKind = make([][]int32, nk)
	off := 0
	for k, c := range kindCount {
		ix.byKind[k] = kindBacking[off : off : off+c]
		off += c
	}

	// Per unit, as one compressed table: count, then fill.
	mentions := len(ix.units)
	ix.unitSlot = make(map[int64]int32, mentions/2+1)
	mentionSlot := make([]int32, 0, mentions)
	var unitCount, lastOp []int32

	// Per player and per name.
	ix.playerSlot = map[string]int32{}
	var firstLine []int
	ix.firstProd = map[playerAsset]time.Duration{}
	ix.byAsset = map[string][]int32{}
	ix.byPower = map[string][]int32{}

	for i := range ops {
		op := &ops[i]
		i32 := int32(i)
		ix.byKind[op.kind] = append(ix.byKind[op.kind], i32)
		for _, u := range ix.recUnits(op) {
			slot, ok := ix.unitSlot[u]
			if !ok {
				slot = int32(len(ix.unitIDs))
				ix.unitSlot[u] = slot
				ix.unitIDs = append(ix.unitIDs, u)
				unitCount = append(unitCount, 0)
				lastOp = append(lastOp, -1)
			}
			if lastOp[slot] == i32 { // a line naming a unit twice
				mentionSlot = append(mentionSlot, -1)
				continue
			}
			lastOp[slot] = i32
			unitCount[slot]++
			mentionSlot = append(mentionSlot, slot)
		}
		player, asset, power := ix.str(op.player), ix.str(op.asset), ix.str(op.power)
		if player != "" {
			slot, ok := ix.playerSlot[player]
			if !ok {
				slot = int32(len(ix.playerOps))
				ix.playerSlot[player] = slot
				ix.playerOps = append(ix.playerOps, nil)
				firstLine = append(firstLine, op.line)
			}
			ix.playerOps[slot] = append(ix.playerOps[slot], i32)
			firstLine[slot] = min(firstLine[slot], op.line)
			if asset != "" && ix.roles(op)&roleProducerBit != 0 {
				key := playerAsset{player, asset}
				if _, seen := ix.firstProd[key]; !seen {
					ix.firstProd[key] = op.at
				}
			}
		}
		if asset != "" {
			ix.byAsset[asset] = append(ix.byAsset[asset], i32)
		}
		if power != "" {
			ix.byPower[power] = append(ix.byPower[power], i32)
		}
	}

	ix.unitStart = make([]int32, len(ix.unitIDs)+1)
	for s, c := range unitCount {
		ix.unitStart[s+1] = ix.unitStart[s] + c
	}
	ix.unitOps = make([]int32, ix.unitStart[len(ix.unitIDs)])
	fill := slices.Clone(ix.unitStart[:len(ix.unitIDs)])
	k := 0
	for i := range ops {
		for range ix.recUnits(&ops[i]) {
			if s := mentionSlot[k]; s >= 0 {
				ix.unitOps[fill[s]] = int32(i)
				fill[s]++
			}
			k++
		}
	}

	// Players in order of first appearance in the source, not in time.
	order := make([]int32, len(ix.playerOps))
	for i := range order {
		order[i] = int32(i)
	}
	slices.SortStableFunc(order, func(a, b int32) int { return firstLine[a] - firstLine[b] })
	byName := make([]string, len(ix.playerOps))
	for name, s := range ix.playerSlot {
		byName[s] = name
	}
	ix.players = make([]string, 0, len(order))
	for _, s := range order {
		ix.players = append(ix.players, byName[s])
	}
}

var roleProducerBit, _ = roleBit(RoleProducer)

// HasFacts reports whether the index holds at least one operation. An index of a
// text where no rule matched (prose, garbage) has none; validators that need facts
// then stay silent.
func (ix *Index) HasFacts() bool { return ix != nil && len(ix.recs) > 0 }

// Len returns the number of operations.
func (ix *Index) Len() int {
	if ix == nil {
		return 0
	}
	return len(ix.recs)
}

// Ops returns the operations ordered by time (line order among equal times), in a
// new slice; their strings and Units are shared with the index.
func (ix *Index) Ops() []Op {
	if ix == nil || len(ix.recs) == 0 {
		return nil
	}
	ops := make([]Op, len(ix.recs))
	for i := range ops {
		ops[i] = ix.op(int32(i))
	}
	return ops
}

// Count returns how many operations of kind (in any case) the index holds.
func (ix *Index) Count(kind string) int {
	if ix == nil {
		return 0
	}
	id, ok := ix.schema.kindID(kind)
	if !ok {
		return 0
	}
	return len(ix.byKind[id])
}

// StatedDuration returns the duration the log states (the rules' Duration line,
// RA3 "录像时长"), and false when it states none.
func (ix *Index) StatedDuration() (time.Duration, bool) {
	if ix == nil {
		return 0, false
	}
	return ix.stated, ix.hasStated
}

// End is the end of the facts: the stated duration or the latest operation's time,
// whichever is later (zero for an empty index). evidence.out_of_range flags an
// evidence time later than End by more than the tolerance.
func (ix *Index) End() time.Duration {
	if ix == nil {
		return 0
	}
	end := ix.stated
	if n := len(ix.recs); n > 0 && ix.recs[n-1].at > end {
		end = ix.recs[n-1].at
	}
	return end
}

// Lines returns how many source lines were read (including prose and lines
// skipped by no rule), up to the bounds.
func (ix *Index) Lines() int {
	if ix == nil {
		return 0
	}
	return ix.lines
}

// Unparsed returns how many lines matched a rule but carried values that did not
// parse (a time, a UnitId, a position); they are not operations. A non-zero count
// usually means a rule is looser than the log format.
func (ix *Index) Unparsed() int {
	if ix == nil {
		return 0
	}
	return ix.unparsed
}

// Truncated reports whether the source exceeded the line or byte bound, so that
// lines past the bound were ignored (see ExtractTexts). The facts interceptor
// records it in the trace.
func (ix *Index) Truncated() bool { return ix != nil && ix.truncated }

// Players returns the players named on operation lines, in order of first
// appearance in the source. The header's player list comes from the context rules;
// player.mismatch treats a claim's player as "not in the replay" when neither
// names it.
func (ix *Index) Players() []string {
	if ix == nil {
		return nil
	}
	return ix.players
}

// HasPlayer reports whether name appears as the player of some operation.
func (ix *Index) HasPlayer(name string) bool {
	if ix == nil {
		return false
	}
	_, ok := ix.playerSlot[name]
	return ok
}

// Units returns every UnitId the operations name, in increasing order.
func (ix *Index) Units() []int64 {
	if ix == nil {
		return nil
	}
	us := slices.Clone(ix.unitIDs)
	slices.Sort(us)
	return us
}

// unitList returns the op indexes naming unit, in time order.
func (ix *Index) unitList(unit int64) []int32 {
	if ix == nil {
		return nil
	}
	s, ok := ix.unitSlot[unit]
	if !ok {
		return nil
	}
	return ix.unitOps[ix.unitStart[s]:ix.unitStart[s+1]]
}

// Observed reports whether any operation names unit (select, power, sell, or as
// builder or producer). unit.not_observed fires when it does not.
func (ix *Index) Observed(unit int64) bool { return len(ix.unitList(unit)) > 0 }

// FirstObserved returns the time of the first operation naming unit.
// timeline.before_production compares it with FirstProduction.
func (ix *Index) FirstObserved(unit int64) (time.Duration, bool) {
	l := ix.unitList(unit)
	if len(l) == 0 {
		return 0, false
	}
	return ix.recs[l[0]].at, true
}

// LastObserved returns the time of the last operation naming unit.
func (ix *Index) LastObserved(unit int64) (time.Duration, bool) {
	l := ix.unitList(unit)
	if len(l) == 0 {
		return 0, false
	}
	return ix.recs[l[len(l)-1]].at, true
}

// UnitPlayers returns the players on whose lines unit appears, in order of first
// appearance in time (normally one). player.mismatch fires when the claim's player
// is not among them.
func (ix *Index) UnitPlayers(unit int64) []string {
	var out []string
	for _, i := range ix.unitList(unit) {
		if p := ix.str(ix.recs[i].player); p != "" && !slices.Contains(out, p) {
			out = append(out, p)
		}
	}
	return out
}

// UnitOps returns the operations naming unit in which its kind plays role (one of
// the Role constants; "" = every operation naming the unit), in time order: the
// unit's powers with times (RolePower), what it built or placed (RoleBuilder),
// what it produced (RoleProducer), its selections (RoleSelect), its sale
// (RoleSell). An unknown role returns nil.
func (ix *Index) UnitOps(unit int64, role string) []*Op {
	var bit roleSet
	if role != "" {
		var ok bool
		if bit, ok = roleBit(role); !ok {
			return nil
		}
	}
	var list []int32
	for _, i := range ix.unitList(unit) {
		if bit == 0 || ix.roles(&ix.recs[i])&bit != 0 {
			list = append(list, i)
		}
	}
	return ix.opsAt(list)
}

// ActedAs reports whether unit appears in an operation whose kind plays role.
// builder.not_observed asks ActedAs(unit, RoleBuilder); identifying evidence for
// evidence.ambiguous is a builder, producer or sell operation of the unit.
func (ix *Index) ActedAs(unit int64, role string) bool {
	bit, ok := roleBit(role)
	if !ok {
		return false
	}
	for _, i := range ix.unitList(unit) {
		if ix.roles(&ix.recs[i])&bit != 0 {
			return true
		}
	}
	return false
}

// UsedPower reports whether unit used power (an operation in RolePower naming
// both). power.not_used fires when it did not.
func (ix *Index) UsedPower(unit int64, power string) bool {
	for _, i := range ix.unitList(unit) {
		r := &ix.recs[i]
		if ix.roles(r)&rolePowerBit != 0 && ix.str(r.power) == power {
			return true
		}
	}
	return false
}

var rolePowerBit, _ = roleBit(RolePower)

// UnitPowers returns the distinct powers unit used, in order of first use.
// asset.power_mismatch checks each against the claimed asset's specialPower tags.
func (ix *Index) UnitPowers(unit int64) []string {
	var out []string
	for _, i := range ix.unitList(unit) {
		r := &ix.recs[i]
		if p := ix.str(r.power); p != "" && ix.roles(r)&rolePowerBit != 0 && !slices.Contains(out, p) {
			out = append(out, p)
		}
	}
	return out
}

// FirstProduction returns when player first produced asset (the earliest
// RoleProducer operation of that player naming that asset), and false when the
// player never produced it. timeline.before_production applies only when it is
// true.
func (ix *Index) FirstProduction(player, asset string) (time.Duration, bool) {
	if ix == nil {
		return 0, false
	}
	t, ok := ix.firstProd[playerAsset{player, asset}]
	return t, ok
}

// PlayerOps returns player's operations whose kind plays role ("" = all), in time
// order: productions (RoleProducer), selections (RoleSelect), builds and
// placements (RoleBuilder). An unknown role returns nil.
func (ix *Index) PlayerOps(player, role string) []*Op {
	if ix == nil {
		return nil
	}
	var bit roleSet
	if role != "" {
		var ok bool
		if bit, ok = roleBit(role); !ok {
			return nil
		}
	}
	s, ok := ix.playerSlot[player]
	if !ok {
		return nil
	}
	var list []int32
	for _, i := range ix.playerOps[s] {
		if bit == 0 || ix.roles(&ix.recs[i])&bit != 0 {
			list = append(list, i)
		}
	}
	return ix.opsAt(list)
}

// Placements returns player's building placements: RoleBuilder operations that
// carry a position, in time order.
func (ix *Index) Placements(player string) []*Op {
	var out []*Op
	for _, op := range ix.PlayerOps(player, RoleBuilder) {
		if op.HasPos {
			out = append(out, op)
		}
	}
	return out
}

// HasRole reports whether operations of kind (in any case) play role — e.g.
// whether a matched evidence item's operation identifies its unit
// (evidence.ambiguous: builder, producer or sell).
func (ix *Index) HasRole(kind, role string) bool {
	if ix == nil {
		return false
	}
	id, ok := ix.schema.kindID(kind)
	return ok && ix.schema.kinds[id].roles.has(role)
}

// EvidenceFields returns the op fields the parameters of evidence type typ (in any
// case) compare with, in order ("unit", "units", "asset", "power", "player",
// "pos"), and false when the rules declare no such evidence type. Validators use
// it to find which parameter of an item is its UnitId or its power.
func (ix *Index) EvidenceFields(typ string) ([]string, bool) {
	if ix == nil {
		return nil, false
	}
	id, ok := ix.schema.kindID(typ)
	if !ok || !ix.schema.kinds[id].hasEvidence {
		return nil, false
	}
	return ix.schema.kinds[id].evidence, true
}
