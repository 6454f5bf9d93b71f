package facts

import (
	"math/bits"
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

// opRec is an operation as an index stores it, in 48 bytes. It holds no pointers —
// its line is a span of the index's text, its player, asset and power ids of the
// index's names (0 = none), its UnitIds a range of the index's units, its position
// an entry of the index's positions (1-based, 0 = none) — so that a memory tier
// full of indexes costs the garbage collector almost nothing to scan: with Op
// values (five strings and a slice each) 256 MiB of indexes were 160 MB of
// pointers to trace on every cycle.
type opRec struct {
	at                   time.Duration
	text                 span
	line                 int32
	kind                 int32
	player, asset, power int32
	unitsStart, unitsEnd int32
	pos                  int32
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
	units []int64
	// pos holds the positions of the operations that have one (the recs' pos - 1).
	pos [][3]float64
	// names holds the players, assets and powers the recs refer to by id; names[0]
	// is "" (none). Each is a piece of text.
	names     []string
	schema    *schema
	stated    time.Duration
	hasStated bool
	lines     int
	unparsed  int
	truncated bool
	// recordSets are the JSON records (records.go), sorted by set name; encoded.
	recordSets     []recordSet
	recordsSkipped int

	// Derived by derive(), never encoded.
	byKind    [][]int32 // kind id -> op indexes, time order
	players   []string  // in order of first appearance (line order)
	nameID    map[string]int32
	playerOps [][]int32                // name id -> op indexes as player, time order
	unitIDs   []int64                  // slot -> UnitId, increasing
	unitStart []int32                  // slot -> start in unitOps; len = slots+1
	unitOps   []int32                  // op indexes per unit slot, time order
	firstProd map[uint64]time.Duration // player id << 32 | asset id
	byAsset   [][]int32                // name id -> op indexes as asset, time order
	byPower   [][]int32                // name id -> op indexes as power, time order
}

// schema is what the rules say about operation kinds, carried by every index so
// that a decoded or merged index answers role and evidence lookups on its own.
type schema struct {
	kinds  []kindInfo
	byFold map[string]int // lower-case kind name -> id
	// folds are the byFold keys by id, which kindID compares a name with one by
	// one when there are at most maxScannedKinds.
	folds []string
}

// maxScannedKinds is the number of kinds up to which kindID compares names one
// by one: for a pack's handful of kinds that is several times cheaper than
// hashing the name.
const maxScannedKinds = 16

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
	sc.folds = make([]string, len(sc.kinds))
	for i, k := range sc.kinds {
		sc.folds[i] = strings.ToLower(k.name)
		sc.byFold[sc.folds[i]] = i
	}
}

// kindID finds a kind by name in any case.
func (sc *schema) kindID(name string) (int, bool) {
	if sc == nil {
		return 0, false
	}
	if len(sc.folds) <= maxScannedKinds {
		// From the last: of two kinds with one lower-case name, byFold holds the
		// later.
		for i := len(sc.folds) - 1; i >= 0; i-- {
			if sc.folds[i] == name {
				return i, true
			}
		}
	} else if id, ok := sc.byFold[name]; ok {
		return id, true
	}
	id, ok := sc.byFold[strings.ToLower(name)]
	return id, ok
}

func (ix *Index) roles(r *opRec) roleSet { return ix.schema.kinds[r.kind].roles }

// str returns the string a span of the index's text holds.
func (ix *Index) str(s span) string { return ix.text[s.start:s.end] }

// name returns the name with id (0: "").
func (ix *Index) name(id int32) string { return ix.names[id] }

// lookupName returns the id of a non-empty name, and false when no op names it.
func (ix *Index) lookupName(name string) (int32, bool) {
	if ix == nil || name == "" {
		return 0, false
	}
	id, ok := ix.nameID[name]
	return id, ok
}

// nameList returns table's entry for name (byAsset, byPower, playerOps).
func (ix *Index) nameList(table [][]int32, name string) []int32 {
	id, ok := ix.lookupName(name)
	if !ok {
		return nil
	}
	return table[id]
}

// recPos returns r's position and whether it has one.
func (ix *Index) recPos(r *opRec) ([3]float64, bool) {
	if r.pos == 0 {
		return [3]float64{}, false
	}
	return ix.pos[r.pos-1], true
}

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
	pos, hasPos := ix.recPos(r)
	return Op{
		Kind:   ix.schema.kinds[r.kind].name,
		At:     r.at,
		Player: ix.name(r.player),
		Asset:  ix.name(r.asset),
		Power:  ix.name(r.power),
		Units:  ix.recUnits(r),
		Pos:    pos,
		Line:   int(r.line),
		Text:   ix.str(r.text),
		HasPos: hasPos,
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

// derive builds the lookup structures from recs (sorted), names and schema: every
// table is a slice indexed by kind, name id or unit slot, carved from one backing
// array per kind of entry after counting.
func (ix *Index) derive() {
	ops := ix.recs
	nk, nn := len(ix.schema.kinds), len(ix.names)
	if nn == 0 {
		ix.names, nn = []string{""}, 1
	}
	ix.nameID = make(map[string]int32, nn-1)
	for id, name := range ix.names[1:] {
		ix.nameID[name] = int32(id + 1)
	}

	// Count per kind, player, asset and power; then carve and fill.
	counts := make([]int32, nk+3*nn)
	kindCount, playerCount, assetCount, powerCount := counts[:nk], counts[nk:nk+nn], counts[nk+nn:nk+2*nn], counts[nk+2*nn:]
	for i := range ops {
		r := &ops[i]
		kindCount[r.kind]++
		playerCount[r.player]++
		assetCount[r.asset]++
		powerCount[r.power]++
	}
	playerCount[0], assetCount[0], powerCount[0] = 0, 0, 0
	total := len(ops)
	for _, c := range counts[nk:] {
		total += int(c)
	}
	backing := make([]int32, 0, total)
	tables := make([][]int32, nk+3*nn)
	for k, c := range counts {
		if c > 0 {
			tables[k] = backing[len(backing) : len(backing) : len(backing)+int(c)]
			backing = backing[:len(backing)+int(c)]
		}
	}
	ix.byKind, ix.playerOps, ix.byAsset, ix.byPower = tables[:nk], tables[nk:nk+nn], tables[nk+nn:nk+2*nn], tables[nk+2*nn:]
	ix.firstProd = map[uint64]time.Duration{}
	var firstLine []int32 // per player id, 0 = not seen
	var order []int32     // player ids in order of first appearance in time
	if nn > 1 {
		firstLine = make([]int32, nn)
	}
	for i := range ops {
		r := &ops[i]
		i32 := int32(i)
		ix.byKind[r.kind] = append(ix.byKind[r.kind], i32)
		if p := r.player; p != 0 {
			if len(ix.playerOps[p]) == 0 {
				order = append(order, p)
				firstLine[p] = r.line
			}
			ix.playerOps[p] = append(ix.playerOps[p], i32)
			firstLine[p] = min(firstLine[p], r.line)
			if r.asset != 0 && ix.roles(r)&roleProducerBit != 0 {
				key := uint64(p)<<32 | uint64(r.asset)
				if _, seen := ix.firstProd[key]; !seen {
					ix.firstProd[key] = r.at
				}
			}
		}
		if r.asset != 0 {
			ix.byAsset[r.asset] = append(ix.byAsset[r.asset], i32)
		}
		if r.power != 0 {
			ix.byPower[r.power] = append(ix.byPower[r.power], i32)
		}
	}
	// Players in order of first appearance in the source, not in time.
	slices.SortStableFunc(order, func(a, b int32) int { return int(firstLine[a]) - int(firstLine[b]) })
	ix.players = make([]string, len(order))
	for k, p := range order {
		ix.players[k] = ix.names[p]
	}

	// Per unit, as one compressed table over the distinct UnitIds in increasing
	// order: count, then fill.
	slotOf := ix.unitSlot
	if set, ok := newUnitSet(ix.units); ok {
		// UnitIds of one replay lie close together: a bit per UnitId in their range
		// lists them in order without sorting the mentions, and finds a slot by
		// counting bits instead of a binary search.
		ix.unitIDs = set.ids()
		slotOf = set.slot
	} else {
		ids := make([]int64, len(ix.units))
		copy(ids, ix.units)
		slices.Sort(ids)
		ids = slices.Compact(ids)
		ix.unitIDs = clip(ids)
	}
	nu := len(ix.unitIDs)
	lastOp := make([]int32, nu)
	for s := range lastOp {
		lastOp[s] = -1
	}
	ix.unitStart = make([]int32, nu+1)
	unitCount := ix.unitStart[1:]
	for i := range ops {
		r := &ops[i]
		i32 := int32(i)
		for _, u := range ix.units[r.unitsStart:r.unitsEnd] {
			slot := slotOf(u)
			if lastOp[slot] == i32 { // a line naming a unit twice
				continue
			}
			lastOp[slot] = i32
			unitCount[slot]++
		}
	}
	for s := range nu {
		ix.unitStart[s+1] += ix.unitStart[s]
	}
	ix.unitOps = make([]int32, ix.unitStart[nu])
	fill := lastOp // reused: the next free place per slot
	copy(fill, ix.unitStart[:nu])
	for i := range ops {
		r := &ops[i]
		i32 := int32(i)
		for _, u := range ix.units[r.unitsStart:r.unitsEnd] {
			s := slotOf(u)
			if f := fill[s]; f > ix.unitStart[s] && ix.unitOps[f-1] == i32 {
				continue // named twice on this line
			}
			ix.unitOps[fill[s]] = i32
			fill[s]++
		}
	}
}

// unitSet is the set of UnitIds an index mentions, as one bit per UnitId from lo,
// with the number of members before each word: a member's slot (its rank among
// the members) is that count plus the bits below it in its word.
type unitSet struct {
	lo    int64
	words []uint64
	ranks []int32
	n     int
}

// newUnitSet returns the set of units when their range is small enough for a bit
// each to cost less than sorting them (at most 64 UnitIds per mention, plus 64 Ki);
// ok is false otherwise.
func newUnitSet(units []int64) (unitSet, bool) {
	if len(units) == 0 {
		return unitSet{}, false
	}
	lo, hi := units[0], units[0]
	for _, u := range units {
		lo = min(lo, u)
		hi = max(hi, u)
	}
	if span := uint64(hi - lo); span >= uint64(64*len(units)+1<<16) {
		return unitSet{}, false
	}
	n := int((hi-lo)>>6) + 1
	set := unitSet{lo: lo, words: make([]uint64, n), ranks: make([]int32, n)}
	for _, u := range units {
		d := u - lo
		set.words[d>>6] |= 1 << (d & 63)
	}
	for w, word := range set.words {
		set.ranks[w] = int32(set.n)
		set.n += bits.OnesCount64(word)
	}
	return set, true
}

// ids returns the members in increasing order.
func (s unitSet) ids() []int64 {
	ids := make([]int64, 0, s.n)
	for w, word := range s.words {
		for word != 0 {
			ids = append(ids, s.lo+int64(w)<<6+int64(bits.TrailingZeros64(word)))
			word &= word - 1
		}
	}
	return ids
}

// slot returns u's rank among the members; u must be one.
func (s unitSet) slot(u int64) int {
	d := u - s.lo
	w := d >> 6
	return int(s.ranks[w]) + bits.OnesCount64(s.words[w]&(1<<(d&63)-1))
}

// unitSlot returns the slot of unit in unitIDs, -1 when no op names it.
func (ix *Index) unitSlot(unit int64) int {
	ids := ix.unitIDs
	lo, hi := 0, len(ids)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if ids[m] < unit {
			lo = m + 1
		} else {
			hi = m
		}
	}
	if lo < len(ids) && ids[lo] == unit {
		return lo
	}
	return -1
}

var roleProducerBit, _ = roleBit(RoleProducer)

// HasFacts reports whether the index holds at least one operation or record. An
// index of a text where no rule matched (prose, garbage) has none; validators that
// need facts then stay silent, and a session does not record it as a segment.
func (ix *Index) HasFacts() bool { return ix != nil && (len(ix.recs) > 0 || len(ix.recordSets) > 0) }

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
	id, ok := ix.lookupName(name)
	return ok && len(ix.playerOps[id]) > 0
}

// Units returns every UnitId the operations name, in increasing order.
func (ix *Index) Units() []int64 {
	if ix == nil {
		return nil
	}
	return slices.Clone(ix.unitIDs)
}

// unitList returns the op indexes naming unit, in time order.
func (ix *Index) unitList(unit int64) []int32 {
	if ix == nil {
		return nil
	}
	s := ix.unitSlot(unit)
	if s < 0 {
		return nil
	}
	return ix.unitOps[ix.unitStart[s]:ix.unitStart[s+1]]
}

// Unit is a UnitId of an index, looked up once for the several questions a
// validator asks about one unit — whether it was observed, by whom, which powers
// it used — instead of once per question. Its methods answer as the Index
// methods of the same names do for its UnitId. The zero Unit (and a Unit of a nil
// index) names no operation.
type Unit struct {
	ix   *Index
	list []int32 // the op indexes naming the unit, in time order
}

// Unit returns unit as the index knows it.
func (ix *Index) Unit(unit int64) Unit { return Unit{ix: ix, list: ix.unitList(unit)} }

// Observed reports whether any operation names unit (select, power, sell, or as
// builder or producer). unit.not_observed fires when it does not.
func (ix *Index) Observed(unit int64) bool { return ix.Unit(unit).Observed() }

// Observed is Index.Observed for the unit.
func (u Unit) Observed() bool { return len(u.list) > 0 }

// FirstObserved returns the time of the first operation naming unit.
// timeline.before_production compares it with FirstProduction.
func (ix *Index) FirstObserved(unit int64) (time.Duration, bool) {
	return ix.Unit(unit).FirstObserved()
}

// FirstObserved is Index.FirstObserved for the unit.
func (u Unit) FirstObserved() (time.Duration, bool) {
	if len(u.list) == 0 {
		return 0, false
	}
	return u.ix.recs[u.list[0]].at, true
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
//
// A unit on one player's lines only (the usual case) costs no allocation: the
// result is then a one-name slice of the index's names.
func (ix *Index) UnitPlayers(unit int64) []string { return ix.Unit(unit).Players() }

// Players is Index.UnitPlayers for the unit.
func (u Unit) Players() []string { return u.ix.distinctNames(u.list, false) }

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
func (ix *Index) ActedAs(unit int64, role string) bool { return ix.Unit(unit).ActedAs(role) }

// ActedAs is Index.ActedAs for the unit.
func (u Unit) ActedAs(role string) bool {
	bit, ok := roleBit(role)
	if !ok {
		return false
	}
	for _, i := range u.list {
		if u.ix.roles(&u.ix.recs[i])&bit != 0 {
			return true
		}
	}
	return false
}

// UsedPower reports whether unit used power (an operation in RolePower naming
// both). power.not_used fires when it did not.
func (ix *Index) UsedPower(unit int64, power string) bool { return ix.Unit(unit).UsedPower(power) }

// UsedPower is Index.UsedPower for the unit.
func (u Unit) UsedPower(power string) bool {
	for _, i := range u.list {
		r := &u.ix.recs[i]
		if u.ix.roles(r)&rolePowerBit != 0 && u.ix.name(r.power) == power {
			return true
		}
	}
	return false
}

var rolePowerBit, _ = roleBit(RolePower)

// UnitPowers returns the distinct powers unit used, in order of first use.
// asset.power_mismatch checks each against the claimed asset's specialPower tags.
//
// A unit that used one power (or none) costs no allocation, as in UnitPlayers.
func (ix *Index) UnitPowers(unit int64) []string { return ix.Unit(unit).Powers() }

// Powers is Index.UnitPowers for the unit.
func (u Unit) Powers() []string { return u.ix.distinctNames(u.list, true) }

// distinctNames returns the distinct non-empty players (powers: the powers of
// the RolePower operations) of the operations of list, in order of first
// appearance. One distinct name is returned as a slice of ix.names (capacity 1,
// so that an append by the caller copies), none as nil; only two or more
// allocate.
func (ix *Index) distinctNames(list []int32, powers bool) []string {
	nameOf := func(r *opRec) int32 {
		if !powers {
			return r.player
		}
		if ix.roles(r)&rolePowerBit == 0 {
			return 0
		}
		return r.power
	}
	first := int32(0)
	k := 0
	for ; k < len(list); k++ {
		id := nameOf(&ix.recs[list[k]])
		if ix.names[id] == "" {
			continue
		}
		if first == 0 {
			first = id
		} else if id != first {
			break
		}
	}
	if first == 0 {
		return nil
	}
	if k == len(list) {
		return ix.names[first : first+1 : first+1]
	}
	// A second name at list[k]: collect by name from there on.
	out := []string{ix.names[first]}
	for _, i := range list[k:] {
		if p := ix.names[nameOf(&ix.recs[i])]; p != "" && !slices.Contains(out, p) {
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
	p, ok := ix.lookupName(player)
	if !ok {
		return 0, false
	}
	a, ok := ix.lookupName(asset)
	if !ok {
		return 0, false
	}
	t, ok := ix.firstProd[uint64(p)<<32|uint64(a)]
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
	s, ok := ix.lookupName(player)
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
func (ix *Index) HasRole(kind, role string) bool { return ix.Kind(kind).HasRole(role) }

// EvidenceFields returns the op fields the parameters of evidence type typ (in any
// case) compare with, in order ("unit", "units", "asset", "power", "player",
// "pos"), and false when the rules declare no such evidence type. Validators use
// it to find which parameter of an item is its UnitId or its power.
func (ix *Index) EvidenceFields(typ string) ([]string, bool) { return ix.Kind(typ).EvidenceFields() }

// Kind is an operation kind of an index's rules, looked up once by name for the
// several questions a validator asks about one evidence item — its fields, its
// roles, whether the facts hold it — instead of once per question. The zero Kind
// (an unknown name, a nil index) has no fields and no role and matches nothing.
type Kind struct {
	ix *Index
	id int
	ok bool
}

// Kind returns the kind named name, in any case.
func (ix *Index) Kind(name string) Kind {
	if ix == nil {
		return Kind{}
	}
	id, ok := ix.schema.kindID(name)
	return Kind{ix: ix, id: id, ok: ok}
}

// HasRole is Index.HasRole for the kind.
func (k Kind) HasRole(role string) bool {
	return k.ok && k.ix.schema.kinds[k.id].roles.has(role)
}

// EvidenceFields is Index.EvidenceFields for the kind.
func (k Kind) EvidenceFields() ([]string, bool) {
	if !k.ok || !k.ix.schema.kinds[k.id].hasEvidence {
		return nil, false
	}
	return k.ix.schema.kinds[k.id].evidence, true
}

// Matches is Index.Matches for evidence of the kind; e.Type is not read.
func (k Kind) Matches(e Evidence, tolerance time.Duration) bool {
	return k.ok && k.ix.matchKind(k.id, e, tolerance) >= 0
}
