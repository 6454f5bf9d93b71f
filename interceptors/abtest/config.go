package abtest

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"regexp"
	"sort"
	"strings"
	"time"

	"github.com/factgate/factgate/configs/units"
	"github.com/factgate/factgate/interceptors"
)

// DefaultCountersTTL is how long an experiment's counters live after its last
// request when the config names no counters_ttl.
const DefaultCountersTTL = 30 * 24 * time.Hour

// Config is a route's `experiment:` block, decoded strictly with the route's
// config (an unknown key is an error naming it):
//
//	experiment:
//	  name: ra3-strict-rules
//	  allow_forcing: true
//	  control: baseline
//	  variants:
//	    - {name: baseline, weight: 50}
//	    - name: strict
//	      weight: 50
//	      additional_rules: "- 只引用录像里出现过的操作。"
//	      temperature: 0.2
//
// New validates it; every problem is reported at start-up, naming the key.
type Config struct {
	// Name identifies the experiment in the report, the trace, the metrics and
	// the counters' keys. Required: letters, digits, '_', '.', '-' (up to 64).
	Name string `yaml:"name"`
	// Salt is hashed with each subject to pick its variant. Empty means the name.
	// Changing it reshuffles every subject (a fresh experiment); keep it to keep
	// subjects where they are.
	Salt string `yaml:"salt"`
	// AllowForcing lets a request choose its variant with the X-Factgate-Variant
	// header (for QA and demos). When false the header is ignored and the trace
	// says so. Forced requests are counted apart from the experiment's statistics.
	AllowForcing bool `yaml:"allow_forcing"`
	// Control names the variant the others are compared with, and the one a
	// request gets when assignment fails. Required.
	Control string `yaml:"control"`
	// CountersTTL is how long the counters live after the experiment's last
	// request (every request renews it). Zero means 30 days (720h).
	CountersTTL units.Duration `yaml:"counters_ttl"`
	// Variants are the experiment's arms; at least two.
	Variants []VariantConfig `yaml:"variants"`
}

// VariantConfig is one arm of an experiment: its weight and its overrides. A
// field left out (nil, zero, empty) keeps the route's own setting.
type VariantConfig struct {
	// Name identifies the variant (X-Factgate-Variant, reports, metrics):
	// letters, digits, '_', '.', '-' (up to 64). Renaming a variant is a new
	// variant: its subjects are assigned afresh.
	Name string `yaml:"name"`
	// Weight is the variant's share of the traffic relative to the others' (> 0).
	Weight float64 `yaml:"weight"`

	// KnowledgeSet replaces the knowledge set resolved for the request (below the
	// client's own X-Factgate-Knowledge-Set header and metadata). It must be a set
	// of the route's pack.
	KnowledgeSet string `yaml:"knowledge_set"`
	// UseCustomSystemPrompt replaces the rendered knowledge with the variant's
	// custom prompt (CustomSystemPrompt or CustomSystemPromptFile, exactly one).
	// False keeps the route's setting.
	UseCustomSystemPrompt bool `yaml:"use_custom_system_prompt"`
	// CustomSystemPrompt is the custom prompt, inline.
	CustomSystemPrompt string `yaml:"custom_system_prompt"`
	// CustomSystemPromptFile names a file holding the custom prompt, read at
	// start-up (relative to the config file); a missing or empty file is an error.
	CustomSystemPromptFile string `yaml:"custom_system_prompt_file"`
	// AdditionalRules, when set, replace the route's additional rules; an empty
	// string means none. Exclusive with AdditionalRulesFile.
	AdditionalRules *string `yaml:"additional_rules"`
	// AdditionalRulesFile names a file holding the additional rules, read at
	// start-up.
	AdditionalRulesFile string `yaml:"additional_rules_file"`

	// Model replaces the model the upstream sees (after the route's
	// upstream_model).
	Model string `yaml:"model"`
	// Temperature, TopP and MaxTokens set those request fields.
	Temperature *float64 `yaml:"temperature"`
	TopP        *float64 `yaml:"top_p"`
	MaxTokens   *int     `yaml:"max_tokens"`
	// Sampling sets any other top-level request fields verbatim, as JSON
	// (presence_penalty: 0.5, reasoning_effort: low, max_completion_tokens: 800).
	// Fields factgate or the fields above own (model, messages, stream,
	// stream_options, metadata, user, temperature, top_p, max_tokens) are refused.
	Sampling map[string]any `yaml:"sampling"`

	// Validate turns validation on or off for the variant's requests. The route
	// must have a validate block.
	Validate *bool `yaml:"validate"`
	// MaxRevisions replaces the route's max_revisions (0 to 10). The route must
	// revise (have a validate or revise block).
	MaxRevisions *int `yaml:"max_revisions"`
	// RevisionThreshold replaces the revision threshold: a severity name (Info,
	// WeakEvidence, Warning, Contradiction, Fatal).
	RevisionThreshold *interceptors.Severity `yaml:"revision_threshold"`
	// Notice replaces the route's revise.notice: none, append or header. The route
	// must revise; append and header need a pack with a notice template.
	Notice *string `yaml:"notice"`
}

// routeStages says which stages the route's chain has, so that a variant
// override no stage would honour fails at start-up instead of silently doing
// nothing.
type routeStages struct {
	// inject: the route injects a system prompt (custom prompt, additional rules).
	inject bool
	// validate: the route has a validate block (the validate override).
	validate bool
	// revise: the route has the hidden revision (max_revisions, threshold).
	revise bool
}

// stagesOf reads which stages the route has from the view of its chain; the
// experiment is the outermost stage, so every other stage is built already.
func stagesOf(route interceptors.StageView) routeStages {
	on := func(name string) bool { return route != nil && route.Stage(name) != nil }
	return routeStages{inject: on("inject"), validate: on("validate"), revise: on("revise")}
}

var (
	namePattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$`)
	// fieldPattern restricts sampling keys to plain top-level JSON member names, so
	// that none is read as an sjson path.
	fieldPattern = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,63}$`)
)

// reservedFields are the request fields a variant's sampling map may not set:
// factgate's own, and those with a dedicated key.
var reservedFields = map[string]string{
	"model":          "use the variant's model key",
	"messages":       "the prompt is changed with custom_system_prompt and additional_rules",
	"stream":         "the client decides whether it streams",
	"stream_options": "the client decides whether it streams",
	"metadata":       "factgate reads and strips it",
	"user":           "it identifies the subject the variant is assigned by",
	"temperature":    "use the variant's temperature key",
	"top_p":          "use the variant's top_p key",
	"max_tokens":     "use the variant's max_tokens key",
}

// validate checks everything that needs no files or dependencies; each error
// names its key.
func (c *Config) validate() error {
	var errs []error
	add := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	switch {
	case c.Name == "":
		add("name: missing (the experiment's name labels its counters, report and metrics)")
	case !namePattern.MatchString(c.Name):
		add("name: %q must be 1 to 64 letters, digits, '_', '.' or '-', starting with a letter or digit", c.Name)
	}
	if c.CountersTTL < 0 {
		add("counters_ttl: %s is negative", c.CountersTTL)
	}
	if len(c.Variants) < 2 {
		add("variants: an experiment needs at least two variants (it has %d)", len(c.Variants))
	}
	seen := map[string]int{}
	total := 0.0
	for i := range c.Variants {
		v := &c.Variants[i]
		where := variantPath(i, v.Name)
		switch {
		case v.Name == "":
			add("%s.name: missing", where)
		case !namePattern.MatchString(v.Name):
			add("%s.name: %q must be 1 to 64 letters, digits, '_', '.' or '-', starting with a letter or digit", where, v.Name)
		}
		if j, dup := seen[v.Name]; dup && v.Name != "" {
			add("%s.name: %q is already the name of variants[%d]", where, v.Name, j)
		} else {
			seen[v.Name] = i
		}
		if !(v.Weight > 0) || math.IsInf(v.Weight, 0) {
			add("%s.weight: %v must be a number greater than 0", where, v.Weight)
		} else {
			total += v.Weight
		}
		errs = append(errs, v.validate(where)...)
	}
	if math.IsInf(total, 0) {
		add("variants: the weights' sum overflows")
	}
	switch _, ok := seen[c.Control]; {
	case c.Control == "":
		add("control: missing (name the variant the others are compared with)")
	case !ok:
		add("control: no variant named %q (variants: %s)", c.Control, strings.Join(variantNames(c.Variants), ", "))
	}
	return errors.Join(errs...)
}

// validate checks one variant's overrides (without files or dependencies).
func (v *VariantConfig) validate(where string) []error {
	var errs []error
	add := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if v.CustomSystemPrompt != "" && v.CustomSystemPromptFile != "" {
		add("%s.custom_system_prompt: custom_system_prompt and custom_system_prompt_file are exclusive; set one", where)
	}
	hasCustom := strings.TrimSpace(v.CustomSystemPrompt) != "" || v.CustomSystemPromptFile != ""
	switch {
	case v.UseCustomSystemPrompt && !hasCustom:
		add("%s.use_custom_system_prompt: true needs custom_system_prompt or custom_system_prompt_file", where)
	case !v.UseCustomSystemPrompt && (v.CustomSystemPrompt != "" || v.CustomSystemPromptFile != ""):
		add("%s.custom_system_prompt: set, but use_custom_system_prompt is not true, so it would never be used", where)
	}
	if v.AdditionalRules != nil && v.AdditionalRulesFile != "" {
		add("%s.additional_rules: additional_rules and additional_rules_file are exclusive; set one", where)
	}
	if v.Model != "" && strings.TrimSpace(v.Model) != v.Model {
		add("%s.model: %q has surrounding spaces", where, v.Model)
	}
	if t := v.Temperature; t != nil && (*t < 0 || math.IsNaN(*t) || math.IsInf(*t, 0)) {
		add("%s.temperature: %v must be a number of at least 0", where, *t)
	}
	if p := v.TopP; p != nil && !(*p >= 0 && *p <= 1) {
		add("%s.top_p: %v must be between 0 and 1", where, *p)
	}
	if m := v.MaxTokens; m != nil && *m <= 0 {
		add("%s.max_tokens: %d must be greater than 0", where, *m)
	}
	for _, k := range sortedKeys(v.Sampling) {
		if why, ok := reservedFields[k]; ok {
			add("%s.sampling.%s: the variant may not set %q (%s)", where, k, k, why)
			continue
		}
		if !fieldPattern.MatchString(k) {
			add("%s.sampling: %q is not a plain request field name (letters, digits, '_')", where, k)
			continue
		}
		if _, err := json.Marshal(v.Sampling[k]); err != nil {
			add("%s.sampling.%s: the value cannot be sent as JSON: %v", where, k, err)
		}
	}
	if m := v.MaxRevisions; m != nil && (*m < 0 || *m > interceptors.MaxRevisionsLimit) {
		add("%s.max_revisions: %d is out of range (want 0 to %d)", where, *m, interceptors.MaxRevisionsLimit)
	}
	if s := v.RevisionThreshold; s != nil && (*s < interceptors.Info || *s > interceptors.Fatal) {
		add("%s.revision_threshold: %v is not a severity", where, *s)
	}
	if n := v.Notice; n != nil {
		if _, err := interceptors.ParseNoticeMode(*n); err != nil {
			add("%s.notice: %v", where, err)
		}
	}
	return errs
}

// checkStages reports the overrides of v that no stage of the route would honour.
func (v *VariantConfig) checkStages(where string, st routeStages, hasPack bool) []error {
	var errs []error
	add := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if !st.inject {
		for _, k := range v.promptKeys() {
			add("%s.%s: the route has no inject block, so no prompt is composed and the override would do nothing", where, k)
		}
	}
	if v.KnowledgeSet != "" && !hasPack {
		add("%s.knowledge_set: the route has no pack, so no knowledge set is resolved (set the route's pack)", where)
	}
	if v.Validate != nil && !st.validate {
		add("%s.validate: the route has no validate block, so there is no validation to turn on or off", where)
	}
	if !st.revise {
		if v.MaxRevisions != nil {
			add("%s.max_revisions: the route has no hidden revision (add a validate block)", where)
		}
		if v.RevisionThreshold != nil {
			add("%s.revision_threshold: the route has no hidden revision (add a validate block)", where)
		}
		if v.Notice != nil {
			add("%s.notice: the route has no hidden revision (add a validate block)", where)
		}
	}
	return errs
}

// promptKeys names the prompt overrides the variant sets.
func (v *VariantConfig) promptKeys() []string {
	var keys []string
	if v.UseCustomSystemPrompt {
		keys = append(keys, "use_custom_system_prompt")
	}
	if v.AdditionalRules != nil {
		keys = append(keys, "additional_rules")
	}
	if v.AdditionalRulesFile != "" {
		keys = append(keys, "additional_rules_file")
	}
	return keys
}

// readPromptFile reads a prompt file named by key, resolved by resolve.
func readPromptFile(where, key, file string, resolve func(string) string) (string, error) {
	path := resolve(file)
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("%s.%s: %w", where, key, err)
	}
	if strings.TrimSpace(string(b)) == "" {
		return "", fmt.Errorf("%s.%s: %s is empty", where, key, path)
	}
	return string(b), nil
}

func variantPath(i int, name string) string {
	if name == "" {
		return fmt.Sprintf("variants[%d]", i)
	}
	return fmt.Sprintf("variants[%d] (%s)", i, name)
}

func variantNames(vs []VariantConfig) []string {
	out := make([]string, 0, len(vs))
	for _, v := range vs {
		out = append(out, v.Name)
	}
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
