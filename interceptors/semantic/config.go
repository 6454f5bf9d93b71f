package semantic

import (
	"errors"
	"fmt"
	"time"

	"github.com/factgate/factgate/configs/units"
)

// Defaults and bounds of a route's semantic block.
const (
	// DefaultTimeout bounds one judge call.
	DefaultTimeout = 20 * time.Second
	// MaxTimeout is the largest timeout accepted: a judge that needs longer holds
	// the client's answer too long.
	MaxTimeout = 5 * time.Minute
	// DefaultRetries is the execution-failure retry budget: one more call after a
	// failed one.
	DefaultRetries = 1
	// MaxRetries is the largest retry budget accepted.
	MaxRetries = 5
	// MaxTemperature is the largest temperature accepted (OpenAI's range is 0-2).
	MaxTemperature = 2.0
)

// FailurePolicy says what an execution failure (the judge could not give a valid
// verdict within the retry budget) means for the request.
type FailurePolicy string

// The failure policies. The zero value means FailOpen.
const (
	// FailOpen (the default): the answer passes unchecked by the judge; the answer
	// gets a semantic.failed Warning issue and the trace says validation is
	// incomplete.
	FailOpen FailurePolicy = "open"
	// FailClosed: an answer the judge could not check does not reach the client.
	// The semantic.failed issue is Fatal; when the draft could not be checked the
	// request fails with 502 (504 when the judge timed out), error code
	// semantic_validation_failed, and no revision is attempted; a revision that
	// could not be checked never wins over the checked draft.
	FailClosed FailurePolicy = "closed"
)

// UnmarshalText accepts open or closed (an empty value is open).
func (p *FailurePolicy) UnmarshalText(b []byte) error {
	switch v := FailurePolicy(b); v {
	case "", FailOpen, FailClosed:
		*p = v
		return nil
	default:
		return fmt.Errorf("failure_policy: unknown policy %q (want open or closed)", string(b))
	}
}

// Config is a route's `semantic:` block: which of the pack's LLM-backed validators
// run on the route, the judge's model profile and what an execution failure means.
// The block's presence turns them on for the route (they are opt-in, never on by
// default); it needs the route's validate block, whose response phase runs every
// validator, the deterministic ones first.
//
//	semantic:
//	  validators: [combat]      # names from the pack's semantic: list (required)
//	  upstream: judge           # an upstreams name; default: the route's own
//	  model: gpt-4o-mini        # default: the route's upstream model
//	  temperature: 0
//	  timeout: 20s              # per judge call
//	  max_tokens: 300           # default: not sent
//	  retries: 1                # execution-failure retry budget
//	  failure_policy: open      # open | closed
//
// Decoded strictly with the route config: an unknown key is an error naming it.
type Config struct {
	// Validators names the pack's semantic validators the route runs, in order.
	// At least one.
	Validators []string `yaml:"validators"`
	// Upstream names the upstream the judge calls go to. Empty means the route's
	// own upstream (with its upstream_model). A named upstream needs Model.
	Upstream string `yaml:"upstream"`
	// Model is the judge's model. Empty means the model of the route's outgoing
	// request (its upstream_model, else the client's).
	Model string `yaml:"model"`
	// Temperature is the judge's sampling temperature. Nil means 0.
	Temperature *float64 `yaml:"temperature"`
	// Timeout bounds each judge call (a retry gets its own). Zero means 20s.
	Timeout units.Duration `yaml:"timeout"`
	// MaxTokens is sent as max_tokens. Zero means not sent (the provider's default).
	MaxTokens int `yaml:"max_tokens"`
	// Retries is how many more calls an execution failure (malformed or
	// inconsistent output, a failed call) may cost before the failure policy
	// applies. Nil means 1; 0 means no retry.
	Retries *int `yaml:"retries"`
	// FailurePolicy is open (default) or closed; see FailurePolicy.
	FailurePolicy FailurePolicy `yaml:"failure_policy"`

	// RouteValidates reports whether the route validates answers when no A/B
	// variant says otherwise (its validate block is not switched off). Stage's
	// Build sets it from the validate stage; it is not read from YAML.
	RouteValidates bool `yaml:"-"`
}

// Settings is a Config with its defaults applied.
type Settings struct {
	// Upstream is the judge's upstream name; "" means the route's own.
	Upstream string
	// Model is the judge's model; "" means the route's outgoing model.
	Model string
	// Temperature is the judge's temperature.
	Temperature float64
	// Timeout bounds each judge call.
	Timeout time.Duration
	// MaxTokens is sent as max_tokens when positive.
	MaxTokens int
	// Retries is the execution-failure retry budget.
	Retries int
	// FailurePolicy is never empty.
	FailurePolicy FailurePolicy
	// MaxJSONDepth bounds the nesting of the judge's answer and of the JSON in
	// its content (server.max_json_depth); 0 means rawjson.DefaultMaxDepth.
	MaxJSONDepth int
}

// Settings returns the config with its defaults applied.
func (c Config) Settings() Settings {
	s := Settings{
		Upstream:      c.Upstream,
		Model:         c.Model,
		Timeout:       c.Timeout.Std(),
		MaxTokens:     c.MaxTokens,
		Retries:       DefaultRetries,
		FailurePolicy: c.FailurePolicy,
	}
	if c.Temperature != nil {
		s.Temperature = *c.Temperature
	}
	if s.Timeout == 0 {
		s.Timeout = DefaultTimeout
	}
	if c.Retries != nil {
		s.Retries = *c.Retries
	}
	if s.FailurePolicy == "" {
		s.FailurePolicy = FailOpen
	}
	return s
}

// Validate reports every out-of-range value, each naming its key and the value.
func (c Config) Validate() error {
	var errs []error
	add := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if len(c.Validators) == 0 {
		add("validators: name at least one of the pack's semantic validators (validators: [combat])")
	}
	seen := map[string]bool{}
	for i, name := range c.Validators {
		switch {
		case name == "":
			add("validators[%d]: empty name", i)
		case seen[name]:
			add("validators[%d]: %q is listed twice", i, name)
		}
		seen[name] = true
	}
	if c.Upstream != "" && c.Model == "" {
		add("model: required when upstream names another upstream (%q): the route's model may not exist there", c.Upstream)
	}
	if t := c.Temperature; t != nil && (*t < 0 || *t > MaxTemperature) {
		add("temperature: %g is out of range (0 to %g)", *t, MaxTemperature)
	}
	if d := c.Timeout.Std(); d < 0 || d > MaxTimeout {
		add("timeout: %s is out of range (up to %s; 0 means %s)", c.Timeout, MaxTimeout, DefaultTimeout)
	}
	if c.MaxTokens < 0 {
		add("max_tokens: %d is negative (0 means not sent)", c.MaxTokens)
	}
	if r := c.Retries; r != nil && (*r < 0 || *r > MaxRetries) {
		add("retries: %d is out of range (0 to %d)", *r, MaxRetries)
	}
	switch c.FailurePolicy {
	case "", FailOpen, FailClosed:
	default:
		add("failure_policy: unknown policy %q (want open or closed)", string(c.FailurePolicy))
	}
	return errors.Join(errs...)
}
