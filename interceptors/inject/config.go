package inject

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/factgate/factgate/interceptors"
)

// Policy says what happens to the client's own system message(s).
type Policy string

// The client system message policies.
const (
	// Merge (the default) removes the client's system and developer messages from
	// their place and appends their text to the injected prompt, under a heading,
	// as additional rules.
	Merge Policy = "merge"
	// Replace drops the client's system and developer messages; the injected prompt
	// is the only one.
	Replace Policy = "replace"
	// Keep injects nothing when the client sent a system or developer message: the
	// request goes upstream as sent. A request without one gets the injected prompt.
	Keep Policy = "keep"
)

// ContractMode says when the pack's contract is part of the injected prompt.
type ContractMode string

// The contract modes.
const (
	// ContractAuto (the default) injects the contract when the route validates
	// answers (it has a validate block) and the request's A/B variant has not
	// turned validation off.
	ContractAuto ContractMode = "auto"
	// ContractAlways injects it on every request.
	ContractAlways ContractMode = "always"
	// ContractNever never injects it.
	ContractNever ContractMode = "never"
)

// When says which requests of the route get the pack's knowledge.
type When string

// The injection conditions.
const (
	// WhenFacts (the default) injects only into the requests the route's pack is
	// about (knowledge.ApplyRules: for RA3, a request carrying an operation log, or
	// whose prompt asks for the claims block); the others go upstream untouched.
	WhenFacts When = "facts"
	// WhenAlways injects the knowledge into every request; the contract still goes
	// only into those the pack's contract applies to.
	WhenAlways When = "always"
)

// Config is a route's `inject` block: what the system prompt of its requests is
// made of. The block's presence turns injection on; every field is optional.
//
//	inject:
//	  system_message: merge        # merge | replace | keep
//	  contract: auto               # auto | always | never
//	  additional_rules_file: rules/ra3-extra.md
//
// The prompt is composed as PRODUCT.md §4 says: the rendered knowledge for the
// request's knowledge set and scopes (or the custom prompt), then the contract, then
// the additional rules, each separated by a blank line — see Compose.
type Config struct {
	// SystemMessage is the policy for the client's own system message; empty means
	// Merge.
	SystemMessage Policy `yaml:"system_message"`
	// UseCustomSystemPrompt replaces the rendered knowledge with the custom prompt
	// (the contract and the additional rules still follow it).
	UseCustomSystemPrompt bool `yaml:"use_custom_system_prompt"`
	// CustomSystemPrompt is the custom prompt, inline. Requires
	// UseCustomSystemPrompt; exclusive with CustomSystemPromptFile.
	CustomSystemPrompt string `yaml:"custom_system_prompt"`
	// CustomSystemPromptFile names a file with the custom prompt, read once at
	// start-up (relative paths are relative to the config file).
	CustomSystemPromptFile string `yaml:"custom_system_prompt_file"`
	// AdditionalRules are appended after the knowledge and the contract, inline.
	// Exclusive with AdditionalRulesFile. Empty: none.
	AdditionalRules string `yaml:"additional_rules"`
	// AdditionalRulesFile names a file with the additional rules, read at start-up.
	AdditionalRulesFile string `yaml:"additional_rules_file"`
	// Contract says when the pack's claims contract (or, for a pack with an answer
	// shape, its answer contract) is injected; empty means ContractAuto. Either
	// way only into a request the pack's contract applies to (never a JSON-mode
	// one, unless the pack allows it).
	Contract ContractMode `yaml:"contract"`
	// When says which requests get the knowledge; empty means WhenFacts. A route
	// without a pack (a custom prompt only) injects into every request.
	When When `yaml:"when"`
	// MergeHeading is the heading the client's system message is appended under
	// (policy merge). Empty: the pack language's default ("## 应用的补充要求" for
	// zh, "## Additional instructions from the application" for en).
	MergeHeading string `yaml:"merge_heading"`

	// RouteValidates reports whether the route validates answers (it has a
	// validate block that is not switched off); ContractAuto follows it. Stage's
	// Build sets it from the validate stage; it is not read from YAML.
	RouteValidates bool `yaml:"-"`
	// RouteHasValidator reports whether the route has a validate block at all, even
	// one switched off: an A/B variant may then turn validation — and with it the
	// contract — on for its requests. Set by Stage's Build.
	RouteHasValidator bool `yaml:"-"`
}

// Default merge headings by pack language; the fallback is English.
var mergeHeadings = map[string]string{
	"zh": "## 应用的补充要求",
	"en": "## Additional instructions from the application",
}

// settings is a validated Config with its files read.
type settings struct {
	policy    Policy
	contract  ContractMode
	when      When
	useCustom bool
	custom    string
	rules     string
	heading   string
	validates bool
	// canValidate: the route has a validate block (a variant may switch it on).
	canValidate bool
}

// load validates cfg and reads the files it names; errors name the key.
func (cfg *Config) load(deps interceptors.Deps) (settings, error) {
	var c Config
	if cfg != nil {
		c = *cfg
	}
	s := settings{policy: c.SystemMessage, contract: c.Contract, when: c.When, useCustom: c.UseCustomSystemPrompt, validates: c.RouteValidates, canValidate: c.RouteHasValidator || c.RouteValidates}
	var errs []error
	add := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	switch s.policy {
	case "":
		s.policy = Merge
	case Merge, Replace, Keep:
	default:
		add("system_message: %q is not merge, replace or keep", c.SystemMessage)
	}
	switch s.contract {
	case "":
		s.contract = ContractAuto
	case ContractAuto, ContractAlways, ContractNever:
	default:
		add("contract: %q is not auto, always or never", c.Contract)
	}
	switch s.when {
	case "":
		s.when = WhenFacts
	case WhenFacts, WhenAlways:
	default:
		add("when: %q is not facts or always", c.When)
	}
	custom, customErr := inlineOrFile("custom_system_prompt", c.CustomSystemPrompt, c.CustomSystemPromptFile, deps)
	if customErr != nil {
		errs = append(errs, customErr)
	}
	s.custom = custom
	rules, err := inlineOrFile("additional_rules", c.AdditionalRules, c.AdditionalRulesFile, deps)
	if err != nil {
		errs = append(errs, err)
	}
	s.rules = rules
	switch {
	case s.useCustom && strings.TrimSpace(s.custom) == "" && customErr == nil:
		add("use_custom_system_prompt: true needs custom_system_prompt or custom_system_prompt_file")
	case !s.useCustom && (c.CustomSystemPrompt != "" || c.CustomSystemPromptFile != ""):
		add("custom_system_prompt: set, but use_custom_system_prompt is false, so it would never be used")
	}
	p := deps.Pack
	if p == nil {
		if !s.useCustom {
			add("the route has no pack, so there is no knowledge to inject: set the route's pack, or use_custom_system_prompt")
		}
		if s.contract == ContractAlways {
			add("contract: always, but the route has no pack to take the contract from")
		}
	} else if s.contract == ContractAlways && PackContract(p) == "" {
		add("contract: always, but pack %s has no claims or answer contract", p.Name)
	}
	if c.MergeHeading != "" {
		s.heading = strings.TrimSpace(c.MergeHeading)
	} else {
		lang := "en"
		if p != nil {
			lang = p.Language
		}
		if s.heading = mergeHeadings[lang]; s.heading == "" {
			s.heading = mergeHeadings["en"]
		}
	}
	return s, errors.Join(errs...)
}

// inlineOrFile returns the inline text or the named file's contents (one of them).
func inlineOrFile(key, inline, file string, deps interceptors.Deps) (string, error) {
	if inline != "" && file != "" {
		return "", fmt.Errorf("%s and %s_file are exclusive; set one", key, key)
	}
	if file == "" {
		return inline, nil
	}
	path := deps.ResolvePath(file)
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("%s_file: %w", key, err)
	}
	if strings.TrimSpace(string(b)) == "" {
		return "", fmt.Errorf("%s_file: %s is empty", key, path)
	}
	return string(b), nil
}
