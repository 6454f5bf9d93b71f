package knowledge

import (
	"io/fs"
	"regexp"
	"slices"
	"text/template"
)

// Pack is one domain pack: everything factgate knows about a domain, as data.
// A pack lives in one folder: pack.yaml plus the files it names (knowledge sets,
// the claims contract, the revision templates, issue messages). The built-in packs
// are embedded from knowledge/packs/<name>/; user packs load from a directory named
// in config. Adding a domain needs no Go change.
//
// pack.yaml is decoded strictly; every regular expression is compiled and every file
// is read at load time, so a broken pack fails before the first request.
type Pack struct {
	// Name identifies the pack ("ra3", "dnd").
	Name string `yaml:"name"`
	// Description is one line for humans.
	Description string `yaml:"description"`
	// Language is the language of the pack's texts ("zh", "en").
	Language string `yaml:"language"`
	// Sets names the pack's knowledge sets and their files (relative to the pack).
	Sets map[string]SetSpec `yaml:"knowledge_sets"`
	// DefaultSet is used when nothing selects a set.
	DefaultSet string `yaml:"default_set"`
	// Context extracts the request context from the request text.
	Context ContextRules `yaml:"context"`
	// ApplyRules say which requests the pack is about: only those get its
	// contract, validation and the hidden revision (and, under inject.when facts,
	// its knowledge). Nil: every request, JSON-mode ones without the contract.
	ApplyRules *ApplyRules `yaml:"applies"`
	// Facts turns lines of the user messages into typed operations. Nil: the pack
	// has no facts.
	Facts *FactRules `yaml:"facts"`
	// Claims is the machine-readable claims contract. Nil: the pack has none.
	Claims *ClaimsContract `yaml:"claims"`
	// Revision holds the hidden revision's templates and leak phrases.
	Revision *RevisionSpec `yaml:"revision"`
	// Messages are the issue messages and recommendations per code, in the pack's
	// language: code -> {message, recommendation} Go text/templates.
	Messages map[string]MessageSpec `yaml:"messages"`
	// MessagesFile names a YAML file (relative to the pack) with more messages in
	// the same form; a code may be defined only once. Empty: none.
	MessagesFile string `yaml:"messages_file"`
	// Answer describes a JSON answer shape (the D&D scene description), validated
	// deterministically. Nil: answers are free text with a claims block.
	Answer *AnswerShape `yaml:"answer"`
	// Semantic declares the pack's LLM-backed validators.
	Semantic []SemanticSpec `yaml:"semantic"`
	// RulesFile names the pack's rules file (relative to the pack): the
	// deterministic rules, in CEL, that check claims against the facts and the
	// knowledge (docs/validation.md). Empty: the pack has none.
	RulesFile string `yaml:"rules"`
	// RuleSet is the rules file, compiled at load; nil without one.
	RuleSet *RuleSet `yaml:"-"`
	// Assets are named text files shared by prompts (policy texts), read at load:
	// name -> file. Knowledge entries and validator prompts refer to them by name.
	Assets map[string]string `yaml:"assets"`

	// Dir is the folder the pack was loaded from ("embedded:ra3" for built-ins).
	Dir string `yaml:"-"`
	// AssetText holds the contents of Assets, by name.
	AssetText map[string]string `yaml:"-"`

	sets map[string]*Set
}

// Set returns the pack's loaded knowledge set with that name, or nil.
func (p *Pack) Set(name string) *Set { return p.sets[name] }

// SetNames returns the names of the pack's knowledge sets, sorted.
func (p *Pack) SetNames() []string { return sortedKeys(p.sets) }

// SetSpec names one knowledge set file and its scope dimension order.
type SetSpec struct {
	// File is the set's JSON file, relative to the pack folder.
	File string `yaml:"file"`
	// Dimensions is the order scope dimensions render in after global
	// (["factions", "maps"]). Dimensions present in the file but not listed render
	// after the listed ones, alphabetically.
	Dimensions []string `yaml:"dimensions"`
	// Title, when set, is the rendered prompt's first heading ("# <title>").
	Title string `yaml:"title"`
	// Headings are the rendered section headings: key "global", and one key per
	// dimension where "{value}" stands for the scope value ("阵营：{value}"). Missing
	// ones use the pack language's defaults.
	Headings map[string]string `yaml:"headings"`
}

// ContextRules are the pack's declarative rules that read the request context
// (knowledge set, scopes, players) out of the request text — what makes adoption
// zero-code. They are applied to the user messages in order, first match wins.
type ContextRules struct {
	// KnowledgeSet selects the set from the text (RA3: the "Mod:" line).
	KnowledgeSet *ValueRule `yaml:"knowledge_set"`
	// Players reads the players in order, each with its scope value in Dimension
	// (RA3: "玩家: PlayerA (盟军); PlayerB (苏联)" -> factions in player order).
	Players *PlayersRule `yaml:"players"`
	// Scopes reads other scope dimensions (RA3: "地图:" -> maps).
	Scopes map[string]ValueRule `yaml:"scopes"`
	// MaxLines bounds how many lines of each text the rules look at: the header
	// block is at the top, and the rules run on every request. Zero means 200.
	MaxLines int `yaml:"max_lines"`
	// MaxBytes bounds how many bytes of each text the rules look at. Zero means
	// 65536.
	MaxBytes int `yaml:"max_bytes"`

	scopeDims []string // the keys of Scopes with a compiled rule, sorted
}

// ValueRule extracts one value with a regular expression whose named group "value"
// holds it. The regex is matched against single lines (without the line break).
// Map rewrites extracted values (keys match exactly, else ignoring ASCII case);
// Default applies when the rule does not match (and, when Map is set, when the
// value is not in it).
type ValueRule struct {
	Regex   string            `yaml:"regex"`
	Map     map[string]string `yaml:"map"`
	Default string            `yaml:"default"`

	Re *regexp.Regexp `yaml:"-"`
	// start is the bytes a line that Re matches can start with (nil: any), so
	// that the lines of a log, which start with a time, cost no regex run.
	start *lineStart
	// memo remembers the rule's verdict on recent lines (nil: none).
	memo *lineMemo[valueVerdict]
}

// PlayersRule extracts the players line (group "value", matched against single
// lines), then each player in it with Item (groups "name" and "scope"), in order.
// Map rewrites scope values (旭日帝国 -> 帝国).
type PlayersRule struct {
	Regex     string            `yaml:"regex"`
	Item      string            `yaml:"item"`
	Dimension string            `yaml:"dimension"`
	Map       map[string]string `yaml:"map"`

	Re     *regexp.Regexp `yaml:"-"`
	ItemRe *regexp.Regexp `yaml:"-"`
	start  *lineStart     // as in ValueRule
	memo   *lineMemo[playersVerdict]
}

// FactRules turn lines of the request's user messages into typed operations.
// Nothing domain-specific is parsed in Go beyond time formats ("m:ss.cc").
type FactRules struct {
	// Version changes whenever the rules change meaning; it is part of the fact
	// index's cache key.
	Version string `yaml:"version"`
	// Duration reads the stated duration (named group "time"). Optional.
	Duration string `yaml:"duration"`
	// Ops are tried on every line in order; the first that matches makes the line
	// an operation.
	Ops []OpRule `yaml:"ops"`
	// Roles say what operations mean to validators: "builder" (the unit built or
	// placed something), "producer" (the unit produced an asset), "power" (the unit
	// used a power), "sell".
	Roles map[string][]string `yaml:"roles"`
	// Evidence declares the structured evidence types ("type|time|p1|p2...") and the
	// operation fields their parameters compare with, in order:
	// build: [asset, unit]; move: [pos]. Each type matches operations of the same op.
	Evidence map[string][]string `yaml:"evidence"`
	// MaxLines bounds how many lines are read (the rest is ignored and said so in
	// the trace). Zero means the default (1,000,000).
	MaxLines int `yaml:"max_lines"`
	// Records read JSON records (orders, invoices...) from the request's messages
	// into named record sets rules look up by key (see RecordRule). A pack may
	// have records and no ops.
	Records []RecordRule `yaml:"records"`

	DurationRe *regexp.Regexp `yaml:"-"`
}

// OpRule makes a line an operation. Regex named groups fill the operation's fields:
// "time" (required), "player", "asset", "power", "unit", "pos", and "units" (a list
// of units split with Units, whose first group is one UnitId).
type OpRule struct {
	Op    string `yaml:"op"`
	Regex string `yaml:"regex"`
	Units string `yaml:"units"`

	Re      *regexp.Regexp `yaml:"-"`
	UnitsRe *regexp.Regexp `yaml:"-"`
}

// ClaimsContract is the machine-readable claims contract (seed 001).
type ClaimsContract struct {
	// Marker precedes the claims block ("[机器可读声明]").
	Marker string `yaml:"marker"`
	// Contract is the file with the contract text injected into the system prompt.
	Contract string `yaml:"contract"`
	// Caps bound each claim list: unitClaims 10, eventClaims 5, timelineClaims 3.
	// Kept for packs written before Kinds; a contract with Kinds may not have Caps.
	Caps map[string]int `yaml:"caps"`
	// Kinds declares the claim kinds (the block's arrays and their items' fields),
	// in order. Empty: the seed's unitClaims/eventClaims/timelineClaims with Caps
	// (see ClaimKinds).
	Kinds ClaimKinds `yaml:"kinds"`
	// Levels lists extra spellings per evidence level ("confirmed": ["确认"]).
	// The English names in any case, with spaces, "_" or "-" between words, are
	// always accepted.
	Levels map[string][]string `yaml:"levels"`

	// ContractText is the contents of Contract.
	ContractText string `yaml:"-"`
}

// RevisionSpec holds the hidden revision's pack data.
type RevisionSpec struct {
	// Template is the revision request's user turn (Go text/template file).
	Template string `yaml:"template"`
	// RepairTemplate asks only for the missing claims block.
	RepairTemplate string `yaml:"repair_template"`
	// LeakPhrases betray a revision or an apology; matched case-insensitively.
	LeakPhrases []string `yaml:"leak_phrases"`
	// NoticeTemplate is the note to the reader when problems survive the revision
	// (Go text/template file over NoticeData). Empty: the pack has none, and its
	// routes default to revise.notice none.
	NoticeTemplate string `yaml:"notice_template"`

	TemplateText       string `yaml:"-"`
	RepairTemplateText string `yaml:"-"`
	NoticeTemplateText string `yaml:"-"`
	// Tmpl and RepairTmpl are the parsed templates; they execute over RevisionData.
	// RepairTmpl is nil when the pack has no repair template.
	Tmpl       *template.Template `yaml:"-"`
	RepairTmpl *template.Template `yaml:"-"`
	// NoticeTmpl is the parsed notice template (nil when the pack has none); it
	// executes over NoticeData.
	NoticeTmpl *template.Template `yaml:"-"`
}

// MessageSpec is the message and recommendation of one issue code, as Go
// text/templates over the fields.
//
// The templates execute over MessageData (or any value with the same fields); an
// argument an issue does not carry renders empty.
type MessageSpec struct {
	Message        string `yaml:"message"`
	Recommendation string `yaml:"recommendation"`
	// Confirm is what a downgraded claim's needsConfirmation gets for the issue:
	// what would confirm the claim (a claim-level issue) or the evidence item left
	// unverified (an item the facts contradict). Empty: the message.
	Confirm string `yaml:"confirm"`
	// Notice is the heading the notice lists the code's findings under
	// (NoticeContradiction, NoticeCitation, NoticeWeak or NoticeUnverified):
	// what the finding says about the statement it is about. Empty: the default
	// for the severity (DefaultNoticeHeading).
	Notice string `yaml:"notice"`

	MessageTmpl        *template.Template `yaml:"-"`
	RecommendationTmpl *template.Template `yaml:"-"`
	ConfirmTmpl        *template.Template `yaml:"-"`
}

// AnswerShape describes a JSON answer (the D&D scene description).
type AnswerShape struct {
	// Required fields and their types ("string").
	Fields map[string]string `yaml:"fields"`
	// Enums restrict string fields to listed values (kind: [combat, narrative, ...]).
	Enums map[string][]string `yaml:"enums"`
	// Contract is the file with the answer contract text injected into the prompt.
	Contract string `yaml:"contract"`

	ContractText string `yaml:"-"`
}

// SemanticSpec declares one LLM-backed validator.
type SemanticSpec struct {
	// Name identifies the validator ("combat").
	Name string `yaml:"name"`
	// Source selects the text judged: the last user message, optionally narrowed by
	// a regex's "value" group.
	Source SourceSpec `yaml:"source"`
	// Proposed is a gjson path into the answer's JSON ("kind").
	Proposed string `yaml:"proposed"`
	// Policy names the asset with the decision policy (shared byte-identically with
	// the producer prompt).
	Policy string `yaml:"policy"`
	// Instruction is the file with the validator's instruction text.
	Instruction string `yaml:"instruction"`
	// Verdicts lists the allowed verdicts with their preconditions.
	Verdicts []VerdictSpec `yaml:"verdicts"`
	// MaxExplanation bounds the explanation in characters.
	MaxExplanation int `yaml:"max_explanation"`
	// Guidance is the correction guidance per rejecting verdict (text/template with
	// .Proposed, .Explanation, .Target).
	Guidance map[string]string `yaml:"guidance"`
	// Evaluation says how `factgate eval` labels this validator's cases and which
	// wrong proposal it tries. Nil: the validator cannot be evaluated.
	Evaluation *EvaluationSpec `yaml:"evaluation"`

	InstructionText string `yaml:"-"`
	// PolicyText is the policy asset's text (byte-identical to the asset).
	PolicyText string `yaml:"-"`
	// GuidanceTmpl holds the parsed Guidance templates, by verdict.
	GuidanceTmpl map[string]*template.Template `yaml:"-"`
}

// EvaluationSpec is the label mapping of a semantic validator's labelled set: what
// a chunk's label says, which proposed values agree with it, and what the wrong
// proposal of a chunk is. Each labelled chunk is a JSON object with the fields id,
// category, transcript and note, and the two the spec names: a boolean label
// (D&D: active_combat) and the labelled proposed value (correct_kind).
//
//	evaluation:
//	  set: eval                 # the pack's own labelled set (a folder of *.json)
//	  label: active_combat      # the chunks' boolean label
//	  label_name: combat        # what a true label means, in the report's words
//	  correct: correct_kind     # the chunks' labelled proposed value
//	  positive: [combat]        # the proposed values that agree with a true label
//	  wrong: {when_true: narrative, when_false: combat}
type EvaluationSpec struct {
	// Set is a folder of labelled chunks (*.json) relative to the pack: the set
	// `factgate eval` runs without --set. Empty: the pack ships none.
	Set string `yaml:"set"`
	// Label is the chunks' boolean label field.
	Label string `yaml:"label"`
	// LabelName is what a true label means, in words ("combat"; a false one is
	// "no combat"). Empty means Label.
	LabelName string `yaml:"label_name"`
	// Correct is the chunks' field holding the labelled proposed value.
	Correct string `yaml:"correct"`
	// Positive are the proposed values that agree with a true label; every other
	// value agrees with a false one.
	Positive []string `yaml:"positive"`
	// Wrong is the wrong proposal of a chunk: a value of the other label.
	Wrong WrongProposals `yaml:"wrong"`

	// SetFS is the Set folder; nil when Set is empty.
	SetFS fs.FS `yaml:"-"`
}

// WrongProposals are the wrong proposals of an evaluation, by the chunk's label.
type WrongProposals struct {
	// WhenTrue is proposed for a chunk labelled true (a value not in Positive).
	WhenTrue string `yaml:"when_true"`
	// WhenFalse is proposed for a chunk labelled false (a value in Positive).
	WhenFalse string `yaml:"when_false"`
}

// Agrees reports the label a proposed value stands for: true for a value in
// Positive.
func (e *EvaluationSpec) Agrees(value string) bool { return slices.Contains(e.Positive, value) }

// WrongFor returns the wrong proposal of a chunk with that label.
func (e *EvaluationSpec) WrongFor(label bool) string {
	if label {
		return e.Wrong.WhenTrue
	}
	return e.Wrong.WhenFalse
}

// Name returns LabelName, or Label when it is empty.
func (e *EvaluationSpec) Name() string {
	if e.LabelName != "" {
		return e.LabelName
	}
	return e.Label
}

// ChunkFields are the fields every labelled chunk has besides the two its
// EvaluationSpec names.
var ChunkFields = []string{"id", "category", "transcript", "note"}

// SourceSpec selects the text a semantic validator judges.
type SourceSpec struct {
	Message string `yaml:"message"` // "last_user"
	Regex   string `yaml:"regex"`

	Re *regexp.Regexp `yaml:"-"`
}

// VerdictSpec is one verdict and when it is consistent.
type VerdictSpec struct {
	Name string `yaml:"name"`
	// Approves marks the accepting verdict.
	Approves bool `yaml:"approves"`
	// WhenProposed / WhenNotProposed: the verdict is consistent only when the
	// proposed value is (is not) one of these.
	WhenProposed    []string `yaml:"when_proposed"`
	WhenNotProposed []string `yaml:"when_not_proposed"`
	// Target is what the value must become ("combat", or "a non-combat kind").
	Target string `yaml:"target"`
}
