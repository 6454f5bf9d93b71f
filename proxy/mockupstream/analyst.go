package mockupstream

import (
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/tidwall/gjson"

	"github.com/factgate/factgate/knowledge/rawjson"
)

// Analyst is a seeded stochastic model of a Red Alert 3 replay analyst: a scripted
// answer generator for measuring, over many requests, what a client of the proxy
// receives. It reads the operation log in the request (OPLOG.md's format), writes
// an analysis — a sentence of prose per claim, then the marker and a claims block
// under the RA3 pack's contract, 6 to 12 claims over the units, events and
// timeline of the log — and makes each claim wrong with probability ErrorRate in
// one of the ways analysts get replays wrong (AnalystErrors). Asked to revise (the
// conversation has an assistant turn), it fixes each wrong claim the revision
// request names with probability FixRate, breaks each claim it had right with
// probability BreakRate (a new error of a kind that applies to it) and repeats the
// rest of its answer. It knows which of its statements are true
// (TrueStatements).
//
// Every answer is a function of Seed, the rates and the request alone — the
// messages before the model's first answer pick the case (a test varies it with a
// line such as "#case 17" in the system message, so the log stays the same), the
// choice index the variant of it — so a run gives the same answers whatever the
// order or concurrency of its requests. A request without an operation log gets a
// short answer without claims.
type Analyst struct {
	// Seed makes the answers reproducible.
	Seed uint64
	// ErrorRate is the probability that each claim of a first answer is wrong.
	ErrorRate float64
	// FixRate is the probability that a revision fixes each wrong claim its
	// request names; 0 is a model that ignores revision requests.
	FixRate float64
	// BreakRate is the probability that a revision gets wrong a claim the answer
	// it revises had right (one no request names): a model that rewrites what it
	// was not asked to touch. 0: a revision never breaks a claim.
	BreakRate float64

	// replays remembers the logs read, by their text's hash: a run sends the same
	// log many times.
	replays sync.Map // uint64 -> *replay
}

// AnalystErrors are the kinds of wrong claims an Analyst makes, with the issue the
// RA3 pack's validator reports for each:
//   - timeline: a unit claimed to be an asset its player first produced after the
//     unit was already seen (timeline.before_production);
//   - power: a cited special power the unit never used (power.not_used);
//   - shifted: a citation whose time is off by 6.5s (evidence.not_in_replay);
//   - late: a citation after the end of the replay (evidence.out_of_range);
//   - player: the unit given to the other player (player.mismatch);
//   - overconfident: "confirmed" on thin evidence — an unpack called an MCV
//     (evidence.ambiguous, builder.not_observed) or no evidence at all
//     (claim.no_evidence);
//   - unpacked-aircraft: a unit that unpacked claimed to be an aircraft
//     (asset.power_mismatch);
//   - bare: a hedged claim without alternatives or what would confirm it
//     (claim.no_alternatives);
//   - ghost: the claim made about a UnitId the log never names, cited as selected
//     (unit.not_observed, evidence.not_in_replay).
var AnalystErrors = []string{"timeline", "power", "shifted", "late", "player", "overconfident", "unpacked-aircraft", "bare", "ghost"}

// Rule returns a script rule that answers every request with the model.
func (a *Analyst) Rule() Rule { return Rule{Name: "analyst", Generate: a.Answer} }

// Answer writes the model's answer to req: one per choice asked for.
func (a *Analyst) Answer(req Request) Answer {
	lastUser, assistant := -1, -1
	for i, m := range req.Messages {
		switch m.Role {
		case "user":
			lastUser = i
		case "assistant":
			assistant = i
		}
	}
	rp, ok := a.replay(req.Messages)
	if !ok || lastUser < 0 {
		return Answer{Content: "这条消息里没有操作记录，无法分析录像。"}
	}
	// The case is the conversation before the model's first answer.
	var key strings.Builder
	for _, m := range req.Messages {
		if m.Role == "assistant" {
			break
		}
		key.WriteString(m.Role)
		key.WriteByte(0)
		key.WriteString(m.Text)
		key.WriteByte(0)
	}
	caseKey := key.String()
	if assistant >= 0 && assistant < lastUser {
		plan := a.plan(rp, caseKey, 0)
		return Answer{Content: a.revise(rp, plan, caseKey, req.Messages[assistant].Text, req.Messages[lastUser].Text)}
	}
	n := max(req.N, 1)
	if n == 1 {
		return Answer{Content: a.plan(rp, caseKey, 0).render()}
	}
	choices := make([]Choice, n)
	for i := range choices {
		choices[i].Content = a.plan(rp, caseKey, i).render()
	}
	return Answer{Choices: choices}
}

// replay reads the operation log of the user messages, once per log text.
func (a *Analyst) replay(msgs []Message) (*replay, bool) {
	for _, m := range msgs {
		if m.Role == "user" && strings.Contains(m.Text, "[UnitId]") {
			return a.replayOf(m.Text)
		}
	}
	return nil, false
}

// replayOf reads the operation log in text, once per text.
func (a *Analyst) replayOf(text string) (*replay, bool) {
	h := fnv.New64a()
	h.Write([]byte(text))
	key := h.Sum64()
	if rp, ok := a.replays.Load(key); ok {
		return rp.(*replay), true
	}
	rp, ok := readReplay(text)
	if !ok {
		return nil, false
	}
	a.replays.Store(key, rp)
	return rp, true
}

// TrueStatements says, for each claim of an answer the model wrote about the
// operation log in log, whether the statement it makes is true: a unit claim's
// unit, player and asset, or an event or timeline claim's text, is one of the
// model's true claims about the log — whatever the level and the evidence it is
// stated with (a true statement may cite a wrong line or claim too much
// certainty). The map is by claim path ("unitClaims[2]"); ok is false when log
// has no operation log the model reads or content no claims block.
func (a *Analyst) TrueStatements(log, content string) (map[string]bool, bool) {
	rp, ok := a.replayOf(log)
	block := gjson.Parse(claimsJSON(content))
	if !ok || !block.IsObject() {
		return nil, false
	}
	out := map[string]bool{}
	block.Get("unitClaims").ForEach(func(k, v gjson.Result) bool {
		id, player, asset := int(v.Get("unitId").Int()), v.Get("player").Str, v.Get("claim").Str
		out["unitClaims["+k.String()+"]"] = slices.ContainsFunc(rp.units, func(u unitTruth) bool {
			return u.claim.UnitID == id && u.claim.Player == player && u.claim.Claim == asset
		})
		return true
	})
	for _, list := range [...]struct {
		field  string
		truths []analystClaim
	}{{"eventClaims", rp.eventTruths()}, {"timelineClaims", rp.timelineTruths()}} {
		block.Get(list.field).ForEach(func(k, v gjson.Result) bool {
			text := v.Get("claim").Str
			out[list.field+"["+k.String()+"]"] = slices.ContainsFunc(list.truths, func(c analystClaim) bool { return c.Claim == text })
			return true
		})
	}
	return out, true
}

// rng returns a generator seeded by the model's seed and the parts.
func (a *Analyst) rng(parts ...string) *rand.Rand {
	h := fnv.New64a()
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], a.Seed)
	h.Write(b[:])
	for _, p := range parts {
		h.Write([]byte(p))
		h.Write([]byte{0})
	}
	s := h.Sum64()
	return rand.New(rand.NewPCG(s, s^0x9e3779b97f4a7c15))
}

// analystClaim is one claim as the model writes it.
type analystClaim struct {
	UnitID            int      `json:"unitId,omitempty"`
	Player            string   `json:"player,omitempty"`
	Claim             string   `json:"claim"`
	EvidenceLevel     string   `json:"evidenceLevel"`
	Evidence          []string `json:"evidence"`
	Alternatives      []string `json:"alternatives,omitempty"`
	NeedsConfirmation []string `json:"needsConfirmation,omitempty"`
}

// slot is one claim of an answer: what is true and, when the model got it wrong,
// what it wrote instead.
type slot struct {
	field string // unitClaims, eventClaims, timelineClaims
	truth analystClaim
	unit  *unitTruth    // the unit a unit claim is about (nil for other claims)
	wrong *analystClaim // nil: the first answer has it right
	kind  string        // the error kind of wrong
}

// answerPlan is the model's first answer to one case.
type answerPlan struct {
	slots []slot
}

// plan draws the case's claims and the errors of its first answer.
func (a *Analyst) plan(rp *replay, caseKey string, choice int) *answerPlan {
	r := a.rng("plan", caseKey, strconv.Itoa(choice))
	p := &answerPlan{}
	units := rp.unitTruths()
	r.Shuffle(len(units), func(i, j int) { units[i], units[j] = units[j], units[i] })
	units = units[:min(len(units), 4+r.IntN(4))]
	slices.SortFunc(units, func(x, y unitTruth) int { return x.firstSeen - y.firstSeen })
	// The errors draw from a stream of their own per claim, so that the claims of
	// a case are the same at every error rate.
	mistake := func() *rand.Rand {
		e := a.rng("error", caseKey, strconv.Itoa(choice), strconv.Itoa(len(p.slots)))
		if e.Float64() < a.ErrorRate {
			return e
		}
		return nil
	}
	for _, u := range units {
		s := slot{field: "unitClaims", truth: u.claim, unit: &u}
		if e := mistake(); e != nil {
			s.kind, s.wrong = rp.unitError(e, u)
		}
		p.slots = append(p.slots, s)
	}
	for _, list := range [...]struct {
		field  string
		claims []analystClaim
		most   int
	}{{"eventClaims", rp.eventTruths(), 1 + r.IntN(3)}, {"timelineClaims", rp.timelineTruths(), 1 + r.IntN(2)}} {
		cs := list.claims
		r.Shuffle(len(cs), func(i, j int) { cs[i], cs[j] = cs[j], cs[i] })
		for _, c := range cs[:min(len(cs), list.most)] {
			s := slot{field: list.field, truth: c}
			if e := mistake(); e != nil {
				s.kind, s.wrong = rp.claimError(e, c)
			}
			p.slots = append(p.slots, s)
		}
	}
	return p
}

// revise answers a revision request: basis is the answer being revised, turn the
// request's user turn. Each slot basis has wrong and turn names is fixed with
// probability FixRate; each slot basis has right is broken with probability
// BreakRate; everything else is written as in basis.
func (a *Analyst) revise(rp *replay, p *answerPlan, caseKey, basis, turn string) string {
	block := gjson.Parse(claimsJSON(basis))
	written := make([]analystClaim, len(p.slots))
	index := map[string]int{}
	for i := range p.slots {
		s := &p.slots[i]
		at := index[s.field]
		index[s.field]++
		current := block.Get(s.field + "." + strconv.Itoa(at))
		written[i] = s.truth
		if !current.Exists() || sameClaim(current, s.truth) {
			// Right in basis (fixed already, or never wrong): kept, unless this
			// revision breaks it.
			if a.BreakRate > 0 {
				if r := a.rng("break", caseKey, strconv.Itoa(i), basis); r.Float64() < a.BreakRate {
					written[i] = *rp.slotError(r, s)
				}
			}
			continue
		}
		wrong := readClaim(current)
		written[i] = wrong
		if !s.namedIn(wrong, turn) {
			continue
		}
		r := a.rng("fix", caseKey, strconv.Itoa(i), basis)
		if r.Float64() < a.FixRate {
			written[i] = s.truth
		}
	}
	return p.renderClaims(written)
}

// slotError makes a new wrong version of a slot's true claim.
func (rp *replay) slotError(r *rand.Rand, s *slot) *analystClaim {
	if s.unit != nil {
		_, w := rp.unitError(r, *s.unit)
		return w
	}
	_, w := rp.claimError(r, s.truth)
	return w
}

// readClaim reads a claim of a block the model wrote.
func readClaim(v gjson.Result) analystClaim {
	strs := func(path string) []string {
		var out []string
		v.Get(path).ForEach(func(_, e gjson.Result) bool { out = append(out, e.Str); return true })
		return out
	}
	return analystClaim{UnitID: int(v.Get("unitId").Int()), Player: v.Get("player").Str, Claim: v.Get("claim").Str, EvidenceLevel: v.Get("evidenceLevel").Str,
		Evidence: strs("evidence"), Alternatives: strs("alternatives"), NeedsConfirmation: strs("needsConfirmation")}
}

// claimsJSON returns the claims block of an answer the model wrote.
func claimsJSON(content string) string {
	i := strings.LastIndex(content, analystMarker)
	if i < 0 {
		return ""
	}
	rest := content[i:]
	start := strings.Index(rest, "```json\n")
	end := strings.LastIndex(rest, "```")
	if start < 0 || end <= start {
		return ""
	}
	return rest[start+len("```json\n") : end]
}

// sameClaim reports whether the claim in a block is c (every field the model
// writes).
func sameClaim(v gjson.Result, c analystClaim) bool {
	w := readClaim(v)
	return v.Exists() && w.UnitID == c.UnitID && w.Player == c.Player && w.Claim == c.Claim && w.EvidenceLevel == c.EvidenceLevel &&
		slices.Equal(w.Evidence, c.Evidence) && slices.Equal(w.Alternatives, c.Alternatives) && slices.Equal(w.NeedsConfirmation, c.NeedsConfirmation)
}

// unitMention matches "UnitId 733" as the pack's messages name a unit (not
// "[UnitId]733", the log's form, which the request's fact lines quote).
var unitMention = regexp.MustCompile(`UnitId (\d+)`)

// namedIn reports whether a revision request's turn names the problem of wrong,
// the slot as the answer being revised has it: its unit, a citation only the
// wrong claim has, or the claim's text.
func (s *slot) namedIn(wrong analystClaim, turn string) bool {
	if s.truth.UnitID != 0 {
		for _, m := range unitMention.FindAllStringSubmatch(turn, -1) {
			if m[1] == strconv.Itoa(s.truth.UnitID) || m[1] == strconv.Itoa(wrong.UnitID) {
				return true
			}
		}
	}
	for _, e := range wrong.Evidence {
		if !slices.Contains(s.truth.Evidence, e) && strings.Contains(turn, e) {
			return true
		}
	}
	return s.truth.UnitID == 0 && strings.Contains(turn, "“"+wrong.Claim+"”")
}

// analystMarker is the RA3 pack's claims marker.
const analystMarker = "[机器可读声明]"

// render writes the first answer: each slot as the truth, or wrong.
func (p *answerPlan) render() string {
	written := make([]analystClaim, len(p.slots))
	for i, s := range p.slots {
		written[i] = s.truth
		if s.wrong != nil {
			written[i] = *s.wrong
		}
	}
	return p.renderClaims(written)
}

// renderClaims writes an answer whose slots say written (one claim per slot).
func (p *answerPlan) renderClaims(written []analystClaim) string {
	var prose strings.Builder
	prose.WriteString("## 对局分析\n")
	lists := map[string][]analystClaim{"unitClaims": {}, "eventClaims": {}, "timelineClaims": {}}
	for i, s := range p.slots {
		c := written[i]
		prose.WriteString(sentence(s.field, c))
		prose.WriteByte('\n')
		lists[s.field] = append(lists[s.field], c)
	}
	prose.WriteString("以上判断都来自操作记录。\n\n")
	var b strings.Builder
	b.WriteString(prose.String())
	b.WriteString(analystMarker)
	b.WriteString("\n```json\n{\n")
	for i, field := range []string{"unitClaims", "eventClaims", "timelineClaims"} {
		fmt.Fprintf(&b, "  %q: [", field)
		for j, c := range lists[field] {
			if j > 0 {
				b.WriteByte(',')
			}
			b.WriteString("\n    ")
			b.WriteString(claimObject(field, c))
		}
		if len(lists[field]) > 0 {
			b.WriteString("\n  ")
		}
		b.WriteByte(']')
		if i < 2 {
			b.WriteByte(',')
		}
		b.WriteByte('\n')
	}
	b.WriteString("}\n```\n")
	return b.String()
}

// claimObject renders one claim as the contract asks (unit claims carry every
// field; event and timeline claims claim, evidenceLevel and evidence).
func claimObject(field string, c analystClaim) string {
	var b strings.Builder
	b.WriteByte('{')
	if field == "unitClaims" {
		fmt.Fprintf(&b, `"unitId": %d, "player": %s, `, c.UnitID, jsonQuote(c.Player))
	}
	fmt.Fprintf(&b, `"claim": %s, "evidenceLevel": %s, "evidence": %s`, jsonQuote(c.Claim), jsonQuote(c.EvidenceLevel), quoteList(c.Evidence))
	if field == "unitClaims" {
		fmt.Fprintf(&b, `, "alternatives": %s, "needsConfirmation": %s`, quoteList(c.Alternatives), quoteList(c.NeedsConfirmation))
	}
	b.WriteByte('}')
	return b.String()
}

func jsonQuote(s string) string { return string(rawjson.AppendString(nil, s)) }

func quoteList(list []string) string {
	b := []byte{'['}
	for i, s := range list {
		if i > 0 {
			b = append(b, ", "...)
		}
		b = rawjson.AppendString(b, s)
	}
	return string(append(b, ']'))
}

// levelWords are the prose words for the evidence levels.
var levelWords = map[string]string{"confirmed": "确认是", "highly likely": "很可能是", "possible": "可能是", "uncertain": "不确定是否为", "ruled out": "不是"}

// sentence is the claim as the prose states it.
func sentence(field string, c analystClaim) string {
	if field != "unitClaims" {
		return c.Claim + "。"
	}
	s := fmt.Sprintf("%s 的 %d %s %s", c.Player, c.UnitID, levelWords[c.EvidenceLevel], c.Claim)
	if len(c.Alternatives) > 0 {
		s += "，也可能是 " + strings.Join(c.Alternatives, "、")
	}
	return s + "。"
}

// replayOp is one operation line of the log.
type replayOp struct {
	at                  int // centiseconds
	clock               string
	player, op          string
	asset, power        string
	unit                int
	units               []int
	builder, producerOf bool
}

// replay is what the model reads of an operation log. It is not changed once
// read (an Analyst shares it between requests).
type replay struct {
	players []string
	end     int // centiseconds: the stated duration, or the last operation
	ops     []replayOp
	// firstProd is each player's first production of each asset.
	firstProd map[string]map[string]int
	// units are the true claims the model can make about units.
	units []unitTruth
}

var (
	replayPlayers  = regexp.MustCompile(`^\s*玩家\s*[:：]\s*(.+?)\s*$`)
	replayPlayer   = regexp.MustCompile(`([^\s;；,，()（）]+)\s*[(（]`)
	replayDuration = regexp.MustCompile(`^\s*录像时长\s*[:：]\s*(\d+:\d{1,2}(?:\.\d+)?)\s*$`)
	replayLine     = regexp.MustCompile(`^(\d+:\d{2}\.\d{2})\s+(\S+)\s+(开始建造建筑|放置建筑|生产单位|出售|选择|使用)\s+(.*)$`)
	replayUnit     = regexp.MustCompile(`\[UnitId\](\d+)`)
)

// readReplay reads an operation log.
func readReplay(text string) (*replay, bool) {
	rp := &replay{}
	for _, line := range strings.Split(text, "\n") {
		line = strings.TrimRight(line, "\r")
		if g := replayPlayers.FindStringSubmatch(line); g != nil && len(rp.players) == 0 {
			for _, p := range replayPlayer.FindAllStringSubmatch(g[1], -1) {
				rp.players = append(rp.players, p[1])
			}
			continue
		}
		if g := replayDuration.FindStringSubmatch(line); g != nil {
			rp.end = centis(g[1])
			continue
		}
		g := replayLine.FindStringSubmatch(line)
		if g == nil {
			continue
		}
		op := replayOp{at: centis(g[1]), clock: g[1], player: g[2]}
		fields := strings.Fields(g[4])
		units := replayUnit.FindAllStringSubmatch(g[4], -1)
		if len(units) == 0 {
			continue
		}
		op.unit, _ = strconv.Atoi(units[0][1])
		switch g[3] {
		case "开始建造建筑":
			op.op, op.asset, op.builder = "build", fields[0], true
		case "放置建筑":
			op.op, op.asset, op.builder = "place", fields[0], true
		case "生产单位":
			op.op, op.asset, op.producerOf = "produce", fields[0], true
		case "出售":
			op.op = "sell"
		case "选择":
			op.op = "select"
			for _, u := range units {
				n, _ := strconv.Atoi(u[1])
				op.units = append(op.units, n)
			}
		case "使用":
			op.op, op.power = "power", fields[0]
		}
		rp.ops = append(rp.ops, op)
		rp.end = max(rp.end, op.at)
	}
	if len(rp.ops) == 0 || len(rp.players) == 0 {
		return nil, false
	}
	rp.firstProd = map[string]map[string]int{}
	for _, op := range rp.ops {
		if op.op != "produce" {
			continue
		}
		fp := rp.firstProd[op.player]
		if fp == nil {
			fp = map[string]int{}
			rp.firstProd[op.player] = fp
		}
		if _, ok := fp[op.asset]; !ok {
			fp[op.asset] = op.at
		}
	}
	rp.units = rp.readUnits()
	return rp, true
}

// centis reads "m:ss.cc" as centiseconds.
func centis(clock string) int {
	m, rest, _ := strings.Cut(clock, ":")
	mins, _ := strconv.Atoi(m)
	secs, _ := strconv.ParseFloat(rest, 64)
	return mins*6000 + int(secs*100+0.5)
}

// clockOf writes centiseconds as "m:ss.cc".
func clockOf(c int) string {
	d := time.Duration(c) * 10 * time.Millisecond
	return fmt.Sprintf("%d:%05.2f", int(d.Minutes()), d.Seconds()-60*float64(int(d.Minutes())))
}

// unitTruth is a unit the model can make a true claim about.
type unitTruth struct {
	claim     analystClaim
	firstSeen int    // centiseconds
	prefix    string // the faction's asset prefix (Allied, Soviet, Japan)
	unpacked  bool
}

// factionPrefixes are the asset name prefixes of the factions.
var factionPrefixes = []string{"Allied", "Soviet", "Japan"}

// prefix returns the faction prefix of the player's assets ("" when unknown).
func (rp *replay) prefix(player string) string {
	for _, op := range rp.ops {
		if op.player == player && op.asset != "" {
			for _, p := range factionPrefixes {
				if strings.HasPrefix(op.asset, p) {
					return p
				}
			}
		}
	}
	return ""
}

// firstProductions returns, per asset, the player's first production
// (centiseconds). The map is shared: do not change it.
func (rp *replay) firstProductions(player string) map[string]int { return rp.firstProd[player] }

// unitTruths returns a copy of the true unit claims.
func (rp *replay) unitTruths() []unitTruth { return slices.Clone(rp.units) }

// unitTruths returns a true claim about every unit the model understands: builders
// (a construction yard), producers (the structure their first product comes from),
// units that unpacked (possibly an MCV) and selected units (possibly the last
// thing their player produced before they were seen).
func (rp *replay) readUnits() []unitTruth {
	type seen struct {
		player  string
		first   *replayOp
		builder *replayOp
		produce *replayOp
		unpack  *replayOp
		owners  map[string]bool
	}
	units := map[int]*seen{}
	var order []int
	for i := range rp.ops {
		op := &rp.ops[i]
		ids := op.units
		if len(ids) == 0 {
			ids = []int{op.unit}
		}
		for _, id := range ids {
			u := units[id]
			if u == nil {
				u = &seen{player: op.player, first: op, owners: map[string]bool{}}
				units[id] = u
				order = append(order, id)
			}
			u.owners[op.player] = true
			switch {
			case op.builder && u.builder == nil:
				u.builder = op
			case op.producerOf && u.produce == nil:
				u.produce = op
			case op.op == "power" && op.power == "SpecialPower_UnpackReplaceSelf" && u.unpack == nil:
				u.unpack = op
			}
		}
	}
	var out []unitTruth
	for _, id := range order {
		u := units[id]
		prefix := rp.prefix(u.player)
		if len(u.owners) != 1 || prefix == "" {
			continue
		}
		t := unitTruth{firstSeen: u.first.at, prefix: prefix}
		c := analystClaim{UnitID: id, Player: u.player, EvidenceLevel: "confirmed"}
		switch {
		case u.builder != nil:
			c.Claim = prefix + "ConstructionYard"
			c.Evidence = []string{fmt.Sprintf("%s|%s|%s|%d", u.builder.op, u.builder.clock, u.builder.asset, id)}
			if u.builder.op == "place" {
				c.Evidence = []string{fmt.Sprintf("build|%s|%s|%d", u.builder.clock, u.builder.asset, id)}
				if !rp.has("build", u.builder.clock, u.builder.asset, id) {
					continue
				}
			}
		case u.produce != nil:
			c.Claim = prefix + structureFor(u.produce.asset)
			c.Evidence = []string{fmt.Sprintf("produce|%s|%s|%d", u.produce.clock, u.produce.asset, id)}
		case u.unpack != nil:
			t.unpacked = true
			c.Claim, c.EvidenceLevel = prefix+"MCV", "possible"
			c.Evidence = []string{fmt.Sprintf("power|%s|%s|%d", u.unpack.clock, u.unpack.power, id)}
			if prefix == "Allied" {
				c.Alternatives = []string{"AlliedMiner"}
			}
			c.NeedsConfirmation = []string{fmt.Sprintf("%d 之后是否作为建造者出现", id)}
		case u.first.op == "select":
			// The last thing the player produced before the unit was seen, and the
			// one before it as the alternative.
			var made []string
			for asset, at := range rp.firstProductions(u.player) {
				if at <= u.first.at && !strings.HasSuffix(asset, "MCV") {
					made = append(made, asset)
				}
			}
			if len(made) == 0 {
				continue
			}
			fp := rp.firstProductions(u.player)
			slices.SortFunc(made, func(x, y string) int {
				if fp[x] != fp[y] {
					return fp[y] - fp[x]
				}
				return strings.Compare(x, y)
			})
			c.Claim, c.EvidenceLevel = made[0], "possible"
			c.Evidence = []string{fmt.Sprintf("select|%s|%d", u.first.clock, id)}
			if len(made) > 1 {
				c.Alternatives = []string{made[1]}
			} else {
				c.NeedsConfirmation = []string{fmt.Sprintf("%d 之后的行动", id)}
			}
		default:
			continue
		}
		t.claim = c
		out = append(out, t)
	}
	return out
}

// has reports an operation of op at clock with asset and unit.
func (rp *replay) has(op, clock, asset string, unit int) bool {
	for _, o := range rp.ops {
		if o.op == op && o.clock == clock && o.asset == asset && o.unit == unit {
			return true
		}
	}
	return false
}

// usedPower reports whether the unit used the power.
func (rp *replay) usedPower(unit int, power string) bool {
	for _, o := range rp.ops {
		if o.op == "power" && o.unit == unit && o.power == power {
			return true
		}
	}
	return false
}

// structureFor is the structure that produces an asset, by its name.
func structureFor(asset string) string {
	switch {
	case strings.Contains(asset, "Infantry") || strings.HasSuffix(asset, "Engineer"):
		return "Barracks"
	case strings.Contains(asset, "Aircraft"):
		return "Airfield"
	case strings.HasSuffix(asset, "Miner"):
		return "Refinery"
	}
	return "WarFactory"
}

// eventTruths are the events of the log: base packs, unpacks and sales.
func (rp *replay) eventTruths() []analystClaim {
	var out []analystClaim
	for _, op := range rp.ops {
		switch {
		case op.op == "power" && strings.HasSuffix(op.power, "ReplaceSelf"):
			what := "展开"
			if strings.Contains(op.power, "Pack") && !strings.Contains(op.power, "Unpack") {
				what = "打包"
			}
			out = append(out, analystClaim{Claim: fmt.Sprintf("%s 在 %s %s了 %d", op.player, op.clock, what, op.unit), EvidenceLevel: "confirmed",
				Evidence: []string{fmt.Sprintf("power|%s|%s|%d", op.clock, op.power, op.unit)}})
		case op.op == "sell":
			out = append(out, analystClaim{Claim: fmt.Sprintf("%s 在 %s 出售了 %d", op.player, op.clock, op.unit), EvidenceLevel: "confirmed",
				Evidence: []string{fmt.Sprintf("sell|%s|%d", op.clock, op.unit)}})
		}
	}
	return out
}

// timelineTruths are each player's first construction of every structure.
func (rp *replay) timelineTruths() []analystClaim {
	var out []analystClaim
	seen := map[string]bool{}
	for _, op := range rp.ops {
		if op.op != "build" || seen[op.player+op.asset] {
			continue
		}
		seen[op.player+op.asset] = true
		out = append(out, analystClaim{Claim: fmt.Sprintf("%s 在 %s 开始建造第一座 %s", op.player, op.clock, op.asset), EvidenceLevel: "confirmed",
			Evidence: []string{fmt.Sprintf("build|%s|%s|%d", op.clock, op.asset, op.unit)}})
	}
	return out
}

// unitError makes a wrong version of a unit's true claim, of a kind that applies
// to it.
func (rp *replay) unitError(r *rand.Rand, u unitTruth) (string, *analystClaim) {
	kinds := []string{"power", "shifted", "late", "player", "overconfident", "ghost"}
	var later []string
	for asset, at := range rp.firstProductions(u.claim.Player) {
		if at > u.firstSeen && asset != u.claim.Claim {
			later = append(later, asset)
		}
	}
	slices.Sort(later)
	if len(later) > 0 {
		kinds = append(kinds, "timeline")
	}
	if u.unpacked {
		kinds = append(kinds, "unpacked-aircraft")
	}
	if u.claim.EvidenceLevel == "possible" {
		kinds = append(kinds, "bare")
	}
	kind := kinds[r.IntN(len(kinds))]
	w := u.claim
	w.Evidence = slices.Clone(u.claim.Evidence)
	switch kind {
	case "timeline":
		w.Claim, w.EvidenceLevel, w.Alternatives, w.NeedsConfirmation = later[r.IntN(len(later))], "highly likely", nil, nil
	case "power":
		power := "SpecialPower_PackReplaceSelf"
		for _, p := range []string{"SpecialPower_PackReplaceSelf", "SpecialPower_UnpackReplaceSelf", "SpecialPowerChronoSwapTeleport"} {
			if !rp.usedPower(u.claim.UnitID, p) {
				power = p
				break
			}
		}
		w.Evidence = append(w.Evidence, fmt.Sprintf("power|%s|%s|%d", clockOf(u.firstSeen), power, u.claim.UnitID))
	case "shifted":
		w.Evidence[0] = shiftClock(w.Evidence[0], 650)
	case "late":
		w.Evidence[0] = setClock(w.Evidence[0], rp.end+4500)
	case "player":
		for _, p := range rp.players {
			if p != u.claim.Player {
				w.Player = p
				break
			}
		}
	case "overconfident":
		w.EvidenceLevel, w.Alternatives, w.NeedsConfirmation = "confirmed", nil, nil
		if !u.unpacked {
			w.Evidence = nil
		}
	case "unpacked-aircraft":
		w.Claim, w.EvidenceLevel = u.prefix+"FighterAircraft", "possible"
		w.Alternatives, w.NeedsConfirmation = []string{u.prefix + "BomberAircraft"}, nil
	case "bare":
		w.Alternatives, w.NeedsConfirmation = nil, nil
	case "ghost":
		w.UnitID = rp.unseenUnit(u.claim.UnitID)
		w.Evidence = []string{fmt.Sprintf("select|%s|%d", clockOf(u.firstSeen), w.UnitID)}
	}
	return kind, &w
}

// unseenUnit returns a UnitId near id that no operation names.
func (rp *replay) unseenUnit(id int) int {
	seen := map[int]bool{}
	for _, op := range rp.ops {
		seen[op.unit] = true
		for _, u := range op.units {
			seen[u] = true
		}
	}
	for n := id + 7; ; n++ {
		if !seen[n] {
			return n
		}
	}
}

// claimError makes a wrong version of an event or timeline claim.
func (rp *replay) claimError(r *rand.Rand, c analystClaim) (string, *analystClaim) {
	w := c
	w.Evidence = slices.Clone(c.Evidence)
	switch kind := []string{"shifted", "late", "overconfident"}[r.IntN(3)]; kind {
	case "shifted":
		w.Evidence[0] = shiftClock(w.Evidence[0], 650)
		return kind, &w
	case "late":
		w.Evidence[0] = setClock(w.Evidence[0], rp.end+4500)
		return kind, &w
	default:
		w.Evidence = nil
		return kind, &w
	}
}

// shiftClock moves an evidence item's time by d centiseconds.
func shiftClock(ev string, d int) string {
	parts := strings.Split(ev, "|")
	parts[1] = clockOf(centis(parts[1]) + d)
	return strings.Join(parts, "|")
}

// setClock sets an evidence item's time.
func setClock(ev string, c int) string {
	parts := strings.Split(ev, "|")
	parts[1] = clockOf(c)
	return strings.Join(parts, "|")
}
