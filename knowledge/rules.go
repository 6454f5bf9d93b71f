package knowledge

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/checker"
	celast "github.com/google/cel-go/common/ast"
	"go.yaml.in/yaml/v3"
)

// RuleKindEvidence is the kind of a rule that runs on each evidence item of every
// claim (before the claim's own rules), with the item in `item` and its claim in
// `claim`.
const RuleKindEvidence = "evidence"

// RuleSeverities are the severities a rule may report, least severe first (the
// names of interceptors.Severity).
var RuleSeverities = []string{"Info", "WeakEvidence", "Warning", "Contradiction", "Fatal"}

// RuleRequirements are what a rule may require before it runs (`requires:`).
var RuleRequirements = []string{"facts", "knowledge"}

// RuleSet is a pack's deterministic rules, read from the file its pack.yaml names
// at `rules:` and compiled once at load.
type RuleSet struct {
	// File is the rules file as named in pack.yaml ("rules.yaml").
	File string
	// Rules are the rules in file order.
	Rules []*Rule

	mu          sync.Mutex
	compiled    any
	compiledErr error
}

// Compiled returns what build made of the rule set the first time it was called
// (the validate engine's plan of its expressions), so a pack's rules are planned
// once however many checkers use it.
func (s *RuleSet) Compiled(build func() (any, error)) (any, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.compiled == nil && s.compiledErr == nil {
		s.compiled, s.compiledErr = build()
	}
	return s.compiled, s.compiledErr
}

// Rule is one deterministic rule: on each claim of its kinds (or each evidence
// item) whose preconditions hold, it computes its let values, and when its
// condition is true it reports an issue with its code, severity, arguments and
// recommendation.
type Rule struct {
	// ID names the rule (unique in the file); Code is the issue code it reports
	// (its id unless `code:` says otherwise, so two rules may report one code for
	// different kinds).
	ID, Code string
	// Kinds are the claim kinds it runs on, or [RuleKindEvidence].
	Kinds []string
	// Severity is the severity name (one of RuleSeverities).
	Severity string
	// Notice is the notice heading the rule's findings go under; "" when the
	// rule leaves it to the pack's messages (it is merged there at load).
	Notice string

	// Preconditions, checked before any expression runs.
	// Levels: the claim's canonical level is one of these (empty: any).
	Levels []string
	// Has: these fields of the claim are present (non-empty); Lacks: absent.
	Has, Lacks []string
	// Requires: "facts" (the request has facts) and/or "knowledge" (a knowledge
	// set resolved).
	Requires []string
	// Structured (evidence rules): the item is in the structured form.
	Structured bool
	// Roles (evidence rules): operations of the item's type have these roles.
	Roles []string
	// Stop: when the rule reports, no later rule of the same kind runs on the
	// claim (or item): the first that applies wins.
	Stop bool

	// Lets are named values computed at most once per claim (or item), in order;
	// a let sees the ones before it.
	Lets []*RuleExpr
	// When is the condition.
	When *RuleExpr
	// Args are the arguments, in file order; one that evaluates to null
	// is left out.
	Args []*RuleExpr
	// RecommendLevel is the level the claim should be lowered to ("" none);
	// RecommendRemove says the claim should go.
	RecommendLevel  string
	RecommendRemove bool
	// RecommendPlayer (a string) and RecommendAlternatives (a list of strings)
	// are expressions, nil when absent.
	RecommendPlayer, RecommendAlternatives *RuleExpr
	// RelatedUnits (list of ints), RelatedAssets and RelatedPowers (lists of
	// strings) say which facts the issue relates to; nil when absent (an
	// evidence rule's finding relates to the units, assets and powers its item
	// names).
	RelatedUnits, RelatedAssets, RelatedPowers *RuleExpr

	// Line and Column locate the rule in its file.
	Line, Column int
}

// RuleExpr is one CEL expression of a rule, compiled and checked.
type RuleExpr struct {
	// Name is the let or argument name, or the field ("when").
	Name string
	// Source is the expression as written.
	Source string
	// AST is the checked expression. The validate engine releases it once it has
	// planned the expression into Go (RuleSet.Compiled keeps the plan).
	AST *cel.Ast
	// Line and Column locate the expression in the rules file.
	Line, Column int
}

// ruleLoader reads one rules file.
type ruleLoader struct {
	l     *packLoader
	file  string
	text  string
	lines []string
	base  *cel.Env
	kinds []string // the claim kinds a rule may name
	roles []string // the fact roles an evidence rule may require
}

func (rl *ruleLoader) failAt(n *yaml.Node, key, format string, args ...any) {
	rl.failPos(n.Line, n.Column, key, format, args...)
}

func (rl *ruleLoader) failPos(line, col int, key, format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	if key != "" {
		msg = key + ": " + msg
	}
	rl.l.errs = append(rl.l.errs, fmt.Errorf("%s:%d:%d: %s", rl.l.file(rl.file), line, col, msg))
}

// rules loads the pack's rules file (pack.yaml `rules:`), compiling every
// expression, and merges each rule's message texts and notice heading into the
// pack's messages (one source of truth for the notice).
func (l *packLoader) rules() {
	p := l.p
	if p.RulesFile == "" {
		return
	}
	text, ok := l.read("rules", p.RulesFile)
	if !ok {
		return
	}
	base, err := NewRuleEnv(nil)
	if err != nil {
		l.fail(p.RulesFile, "", "rule environment: %v", err)
		return
	}
	rl := &ruleLoader{l: l, file: p.RulesFile, text: text, lines: strings.Split(text, "\n"), base: base}
	rl.kinds = append(slices.Clone(claimLists), l.declaredKinds()...)
	if p.Facts != nil {
		for r := range p.Facts.Roles {
			rl.roles = append(rl.roles, r)
		}
		slices.Sort(rl.roles)
	}
	var doc yaml.Node
	if err := yaml.Unmarshal([]byte(text), &doc); err != nil {
		l.fail(p.RulesFile, "", "%v", err)
		return
	}
	if len(doc.Content) == 0 {
		l.fail(p.RulesFile, "", "empty (want a mapping with the key rules)")
		return
	}
	root := doc.Content[0]
	if root.Kind != yaml.MappingNode {
		rl.failAt(root, "", "want a mapping with the key rules")
		return
	}
	set := &RuleSet{File: p.RulesFile}
	ids := map[string]bool{}
	for i := 0; i+1 < len(root.Content); i += 2 {
		k, v := root.Content[i], root.Content[i+1]
		if k.Value != "rules" {
			rl.failAt(k, k.Value, "unknown key (want rules)")
			continue
		}
		if v.Kind != yaml.SequenceNode {
			rl.failAt(v, "rules", "want a list of rules")
			continue
		}
		for j, rn := range v.Content {
			if r := rl.rule(j, rn); r != nil {
				if ids[r.ID] {
					rl.failAt(rn, fmt.Sprintf("rules[%d]", j), "id %q is used twice", r.ID)
					continue
				}
				ids[r.ID] = true
				set.Rules = append(set.Rules, r)
			}
		}
	}
	rl.mergeMessages(set)
	p.RuleSet = set
}

// declaredKinds returns the claim kinds the pack declares beyond the ra3 lists
// (claims.kinds, and the keys of the older claims.caps).
func (l *packLoader) declaredKinds() []string {
	var out []string
	if c := l.p.Claims; c != nil {
		for k := range c.Caps {
			if !slices.Contains(claimLists, k) {
				out = append(out, k)
			}
		}
		for _, k := range c.Kinds {
			if !slices.Contains(claimLists, k.Name) && !slices.Contains(out, k.Name) {
				out = append(out, k.Name)
			}
		}
	}
	slices.Sort(out)
	return out
}

// rule reads and compiles rules[i].
func (rl *ruleLoader) rule(i int, n *yaml.Node) *Rule {
	where := fmt.Sprintf("rules[%d]", i)
	if n.Kind != yaml.MappingNode {
		rl.failAt(n, where, "want a mapping (id, kind, severity, when...)")
		return nil
	}
	r := &Rule{Line: n.Line, Column: n.Column}
	var letNode, whenNode, argsNode, recNode, relNode *yaml.Node
	fields := map[string]*yaml.Node{}
	for j := 0; j+1 < len(n.Content); j += 2 {
		k, v := n.Content[j], resolveAlias(n.Content[j+1])
		fields[k.Value] = v
	}
	if id := fields["id"]; id != nil {
		r.ID = strings.TrimSpace(id.Value)
		where = fmt.Sprintf("rules[%d] (%s)", i, r.ID)
	}
	for j := 0; j+1 < len(n.Content); j += 2 {
		k := n.Content[j]
		v := resolveAlias(n.Content[j+1])
		key := where + "." + k.Value
		switch k.Value {
		case "id":
		case "code":
			r.Code = rl.scalar(v, key)
		case "kind":
			r.Kinds = rl.strings(v, key)
		case "severity":
			s := rl.scalar(v, key)
			if sv, ok := ruleSeverity(s); ok {
				r.Severity = sv
			} else {
				rl.failAt(v, key, "unknown severity %q (want %s)", s, strings.Join(RuleSeverities, ", "))
			}
		case "notice":
			r.Notice = rl.scalar(v, key)
			if !IsNoticeHeading(r.Notice) {
				rl.failAt(v, key, "unknown heading %q (want %s)", r.Notice, strings.Join(NoticeHeadings, ", "))
			}
		case "message", "recommendation", "confirm":
			// merged into the pack's messages (mergeMessages)
			rl.scalar(v, key)
		case "levels":
			r.Levels = rl.strings(v, key)
			for _, lv := range r.Levels {
				if !slices.Contains(evidenceLevels, lv) {
					rl.failAt(v, key, "unknown level %q (want %s)", lv, strings.Join(evidenceLevels, ", "))
				}
			}
		case "has":
			r.Has = rl.strings(v, key)
		case "lacks":
			r.Lacks = rl.strings(v, key)
		case "requires":
			r.Requires = rl.strings(v, key)
			for _, q := range r.Requires {
				if !slices.Contains(RuleRequirements, q) {
					rl.failAt(v, key, "unknown requirement %q (want %s)", q, strings.Join(RuleRequirements, ", "))
				}
			}
		case "structured":
			r.Structured = rl.boolean(v, key)
		case "stop":
			r.Stop = rl.boolean(v, key)
		case "roles":
			r.Roles = rl.strings(v, key)
			for _, ro := range r.Roles {
				if !slices.Contains(rl.roles, ro) {
					rl.failAt(v, key, "unknown fact role %q (the pack's facts.roles: %s)", ro, strings.Join(rl.roles, ", "))
				}
			}
		case "let":
			letNode = v
		case "when":
			whenNode = v
		case "args":
			argsNode = v
		case "recommend":
			recNode = v
		case "related":
			relNode = v
		default:
			rl.failAt(k, key, "unknown key (want id, code, kind, severity, notice, message, recommendation, confirm, levels, has, lacks, requires, structured, roles, stop, let, when, args, recommend, related)")
		}
	}
	if r.ID == "" {
		rl.failAt(n, where+".id", "missing")
		return nil
	}
	if r.Code == "" {
		r.Code = r.ID
	}
	if r.Severity == "" && fields["severity"] == nil {
		rl.failAt(n, where+".severity", "missing (want %s)", strings.Join(RuleSeverities, ", "))
	}
	if len(r.Kinds) == 0 {
		rl.failAt(n, where+".kind", "missing (a claim kind: %s, or evidence)", strings.Join(rl.kinds, ", "))
	}
	evidence := slices.Contains(r.Kinds, RuleKindEvidence)
	for _, k := range r.Kinds {
		if k != RuleKindEvidence && !slices.Contains(rl.kinds, k) {
			rl.failAt(fields["kind"], where+".kind", "unknown claim kind %q (want %s, or evidence)", k, strings.Join(rl.kinds, ", "))
		}
	}
	if evidence && len(r.Kinds) > 1 {
		rl.failAt(fields["kind"], where+".kind", "evidence rules run on items; do not mix evidence with claim kinds")
	}
	if !evidence && (r.Structured || len(r.Roles) > 0) {
		rl.failAt(n, where, "structured and roles apply to evidence rules only")
	}
	// The expressions: lets first, each seeing the ones before it.
	env := rl.base
	var lets []string
	if letNode != nil {
		if letNode.Kind != yaml.MappingNode {
			rl.failAt(letNode, where+".let", "want a mapping name: expression")
		} else {
			for j := 0; j+1 < len(letNode.Content); j += 2 {
				k, v := letNode.Content[j], resolveAlias(letNode.Content[j+1])
				name := k.Value
				if !isIdent(name) || slices.Contains([]string{RuleVarClaim, RuleVarItem, RuleVarFacts}, name) || slices.Contains(lets, name) {
					rl.failAt(k, where+".let."+name, "want a new identifier (letters, digits, _), not claim, item, facts or an earlier let")
					continue
				}
				r.Lets = append(r.Lets, rl.compile(env, v, where+".let."+name, name, nil))
				lets = append(lets, name)
				if e, err := env.Extend(cel.Variable(name, cel.DynType)); err == nil {
					env = e
				}
			}
		}
	}
	if whenNode == nil {
		rl.failAt(n, where+".when", "missing (the condition, a CEL expression)")
	} else {
		r.When = rl.compile(env, whenNode, where+".when", "when", cel.BoolType)
	}
	if argsNode != nil {
		if argsNode.Kind != yaml.MappingNode {
			rl.failAt(argsNode, where+".args", "want a mapping name: expression")
		} else {
			for j := 0; j+1 < len(argsNode.Content); j += 2 {
				k, v := argsNode.Content[j], resolveAlias(argsNode.Content[j+1])
				r.Args = append(r.Args, rl.compile(env, v, where+".args."+k.Value, k.Value, nil))
			}
		}
	}
	if recNode != nil {
		rl.mapping(recNode, where+".recommend", func(k string, v *yaml.Node) {
			key := where + ".recommend." + k
			switch k {
			case "level":
				r.RecommendLevel = rl.scalar(v, key)
				if !slices.Contains(evidenceLevels, r.RecommendLevel) {
					rl.failAt(v, key, "unknown level %q (want %s)", r.RecommendLevel, strings.Join(evidenceLevels, ", "))
				}
			case "remove":
				r.RecommendRemove = rl.boolean(v, key)
			case "player":
				r.RecommendPlayer = rl.compile(env, v, key, k, nil)
			case "alternatives":
				r.RecommendAlternatives = rl.compile(env, v, key, k, nil)
			default:
				rl.failAt(v, key, "unknown key (want level, remove, player, alternatives)")
			}
		})
	}
	if relNode != nil {
		rl.mapping(relNode, where+".related", func(k string, v *yaml.Node) {
			key := where + ".related." + k
			switch k {
			case "units":
				r.RelatedUnits = rl.compile(env, v, key, k, nil)
			case "assets":
				r.RelatedAssets = rl.compile(env, v, key, k, nil)
			case "powers":
				r.RelatedPowers = rl.compile(env, v, key, k, nil)
			default:
				rl.failAt(v, key, "unknown key (want units, assets, powers)")
			}
		})
	}
	return r
}

func resolveAlias(n *yaml.Node) *yaml.Node {
	for n != nil && n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	return n
}

func (rl *ruleLoader) mapping(n *yaml.Node, key string, f func(k string, v *yaml.Node)) {
	if n.Kind != yaml.MappingNode {
		rl.failAt(n, key, "want a mapping")
		return
	}
	for j := 0; j+1 < len(n.Content); j += 2 {
		f(n.Content[j].Value, resolveAlias(n.Content[j+1]))
	}
}

func (rl *ruleLoader) scalar(n *yaml.Node, key string) string {
	if n.Kind != yaml.ScalarNode {
		rl.failAt(n, key, "want a single value")
		return ""
	}
	return strings.TrimSpace(n.Value)
}

func (rl *ruleLoader) boolean(n *yaml.Node, key string) bool {
	s := rl.scalar(n, key)
	b, err := strconv.ParseBool(s)
	if err != nil {
		rl.failAt(n, key, "want true or false, not %q", s)
	}
	return b
}

// strings reads a value or a list of values.
func (rl *ruleLoader) strings(n *yaml.Node, key string) []string {
	switch n.Kind {
	case yaml.ScalarNode:
		if s := strings.TrimSpace(n.Value); s != "" {
			return []string{s}
		}
		return nil
	case yaml.SequenceNode:
		var out []string
		for _, c := range n.Content {
			c = resolveAlias(c)
			if c.Kind != yaml.ScalarNode {
				rl.failAt(c, key, "want a list of values")
				continue
			}
			out = append(out, strings.TrimSpace(c.Value))
		}
		return out
	}
	rl.failAt(n, key, "want a value or a list of values")
	return nil
}

// compile parses and checks one expression in env; want, when not nil, is the
// type it must have (dyn is accepted). A problem is reported at the line and
// column of the expression in the file.
func (rl *ruleLoader) compile(env *cel.Env, n *yaml.Node, key, name string, want *cel.Type) *RuleExpr {
	if n.Kind != yaml.ScalarNode {
		rl.failAt(n, key, "want a CEL expression")
		return nil
	}
	e := &RuleExpr{Name: name, Source: n.Value, Line: n.Line, Column: n.Column}
	if strings.TrimSpace(n.Value) == "" {
		rl.failAt(n, key, "empty expression")
		return nil
	}
	ast, iss := env.Compile(n.Value)
	if iss != nil && iss.Err() != nil {
		for _, ce := range iss.Errors() {
			line, col := rl.position(n, ce.Location.Line(), ce.Location.Column())
			rl.failPos(line, col, key, "%s", ce.Message)
		}
		return nil
	}
	if want != nil {
		if t := ast.OutputType(); !t.IsAssignableType(want) && t.Kind() != cel.DynKind {
			rl.failAt(n, key, "the expression is a %s, want a %s", t, want)
			return nil
		}
	}
	if est, err := env.EstimateCost(ast, ruleSizes{}); err != nil {
		rl.failAt(n, key, "estimating its cost: %v", err)
		return nil
	} else if est.Max > RuleCostLimit {
		rl.failAt(n, key, "the expression may cost up to %d, more than the limit of %d (loops over lists of up to %d items, %d for records)", est.Max, RuleCostLimit, ruleListSize, ruleRecordsSize)
		return nil
	}
	e.AST = ast
	return e
}

// RuleCostLimit bounds the CEL cost of one expression of a rule, in the worst
// case: it is checked at load (cel's cost estimate, lists of at most ruleListSize
// items, records of at most ruleRecordsSize), so an expression that could stall a
// request fails at load and none is tracked at run time.
const RuleCostLimit = 10_000_000

const (
	ruleListSize    = 1_000
	ruleRecordsSize = 10_000
)

// ruleSizes estimates the size of the lists and strings a rule's expression
// reads: records(set) up to ruleRecordsSize, anything else up to ruleListSize.
type ruleSizes struct{}

func (ruleSizes) EstimateSize(n checker.AstNode) *checker.SizeEstimate {
	if e := n.Expr(); e.Kind() == celast.CallKind && e.AsCall().FunctionName() == "records" {
		return &checker.SizeEstimate{Min: 0, Max: ruleRecordsSize}
	}
	return &checker.SizeEstimate{Min: 0, Max: ruleListSize}
}

func (ruleSizes) EstimateCallCost(function, overloadID string, target *checker.AstNode, args []checker.AstNode) *checker.CallEstimate {
	return nil
}

// position maps a line and 0-based column inside an expression onto the rules
// file: the scalar starts at n's line and column (after its opening quote); a
// block scalar's lines start on the next line, at their own indentation.
func (rl *ruleLoader) position(n *yaml.Node, line, col int) (int, int) {
	if line < 1 {
		line = 1
	}
	switch n.Style {
	case yaml.LiteralStyle, yaml.FoldedStyle:
		// The block's lines follow the indicator, indented as its first line.
		indent := 0
		if n.Line < len(rl.lines) {
			s := rl.lines[n.Line]
			indent = len(s) - len(strings.TrimLeft(s, " "))
		}
		return n.Line + line, indent + col + 1
	case yaml.SingleQuotedStyle, yaml.DoubleQuotedStyle:
		if line == 1 {
			return n.Line, n.Column + 1 + col
		}
	default:
		if line == 1 {
			return n.Line, n.Column + col
		}
	}
	return n.Line + line - 1, col + 1
}

func isIdent(s string) bool {
	if s == "" {
		return false
	}
	for i, c := range s {
		if c == '_' || ('a' <= c && c <= 'z') || ('A' <= c && c <= 'Z') || (i > 0 && '0' <= c && c <= '9') {
			continue
		}
		return false
	}
	return true
}

// ruleSeverity reads a severity name in any case ("contradiction").
func ruleSeverity(s string) (string, bool) {
	n := strings.ToLower(strings.NewReplacer("_", "", "-", "", " ", "").Replace(s))
	for _, v := range RuleSeverities {
		if strings.ToLower(v) == n {
			return v, true
		}
	}
	return "", false
}

// mergeMessages feeds each rule's message, recommendation, confirm text and
// notice heading into the pack's messages, so the notice and the revision read
// one table: a code's texts come from its rule or from the messages file, never
// both, and a notice heading declared twice must agree.
func (rl *ruleLoader) mergeMessages(set *RuleSet) {
	p := rl.l.p
	if p.Messages == nil {
		p.Messages = map[string]MessageSpec{}
	}
	// Re-read the texts from the nodes: they are not kept on Rule.
	var doc yaml.Node
	_ = yaml.Unmarshal([]byte(rl.text), &doc)
	texts := map[string][3]string{}
	if len(doc.Content) > 0 && doc.Content[0].Kind == yaml.MappingNode && len(doc.Content[0].Content) >= 2 {
		for _, rn := range doc.Content[0].Content[1].Content {
			var id string
			var t [3]string
			for j := 0; j+1 < len(rn.Content); j += 2 {
				v := resolveAlias(rn.Content[j+1])
				switch rn.Content[j].Value {
				case "id":
					id = strings.TrimSpace(v.Value)
				case "message":
					t[0] = v.Value
				case "recommendation":
					t[1] = v.Value
				case "confirm":
					t[2] = v.Value
				}
			}
			texts[id] = t
		}
	}
	for _, r := range set.Rules {
		t := texts[r.ID]
		m, had := p.Messages[r.Code]
		if t[0] != "" || t[1] != "" || t[2] != "" {
			if had && m.Message != "" {
				rl.failPos(r.Line, r.Column, fmt.Sprintf("%s.message", r.ID), "the code %s has its message in %s too; keep one", r.Code, orDefault(p.MessagesFile, PackFile))
				continue
			}
			m.Message, m.Recommendation, m.Confirm = t[0], t[1], t[2]
			sample := MessageData{Code: "sample", Path: "unitClaims[0]", Args: map[string]string{}}
			key := r.ID + "."
			m.MessageTmpl = rl.l.template(rl.file, key+"message", m.Message, sample)
			if m.Recommendation != "" {
				m.RecommendationTmpl = rl.l.template(rl.file, key+"recommendation", m.Recommendation, sample)
			}
			if m.Confirm != "" {
				m.ConfirmTmpl = rl.l.template(rl.file, key+"confirm", m.Confirm, sample)
			}
		}
		if r.Notice != "" {
			if m.Notice != "" && m.Notice != r.Notice {
				rl.failPos(r.Line, r.Column, r.ID+".notice", "heading %q differs from %q the messages give the code %s", r.Notice, m.Notice, r.Code)
				continue
			}
			m.Notice = r.Notice
		}
		if had || m.Message != "" || m.Notice != "" {
			p.Messages[r.Code] = m
		}
	}
}

func orDefault(s, d string) string {
	if s == "" {
		return d
	}
	return s
}
