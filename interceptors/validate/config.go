package validate

import (
	"fmt"
	"time"

	"github.com/factgate/factgate/configs/units"
)

// Defaults of Config.
const (
	// DefaultTimeTolerance is how far an evidence time may be from the operation it
	// cites (models round times).
	DefaultTimeTolerance = 500 * time.Millisecond
	// DefaultMaxFactsPerIssue bounds the related facts attached to one issue.
	DefaultMaxFactsPerIssue = 8
	// MaxFactsPerIssueLimit is the largest max_facts_per_issue accepted: an issue is
	// read by a model in a revision request, not a log dump.
	MaxFactsPerIssueLimit = 200
	// MaxTimeTolerance is the largest time_tolerance accepted. A minute of slack
	// would let almost any citation of a busy log match something.
	MaxTimeTolerance = 10 * time.Second
)

// StripMode says whether the claims block is removed from the answer the client
// gets. The validator only carries it; the revision step applies it.
type StripMode string

// The strip modes. The zero value means StripAuto.
const (
	// StripAuto strips the block when the proxy injected the claims contract and
	// keeps it when the client's own prompt asked for claims.
	StripAuto StripMode = "auto"
	// StripAlways always removes the block.
	StripAlways StripMode = "always"
	// StripNever always keeps the block.
	StripNever StripMode = "never"
)

// UnmarshalText accepts auto, always or never (an empty value is auto).
func (m *StripMode) UnmarshalText(b []byte) error {
	switch v := StripMode(b); v {
	case "", StripAuto, StripAlways, StripNever:
		*m = v
		return nil
	default:
		return fmt.Errorf("strip_claims: unknown mode %q (want auto, always or never)", string(b))
	}
}

// Config is a route's `validate:` block, decoded strictly with the route config (an
// unknown key is an error naming it). Nil pointers and zero values mean the
// defaults; Settings applies them. The zero Config is the default: enabled, claims
// required, 500ms tolerance, 8 facts per issue, strip auto.
type Config struct {
	// Enabled turns validation on. Nil means true. A request's A/B variant may
	// override it (Exchange.Overrides.Validate).
	Enabled *bool `yaml:"enabled"`
	// RequireClaims makes a missing claims block Fatal (which triggers a repair
	// request); false makes it a Warning. Nil means true.
	RequireClaims *bool `yaml:"require_claims"`
	// TimeTolerance is how far (inclusive) an evidence time may be from the
	// operation it cites, and how far past the end of the facts it may be before it
	// is out of range. Nil means 500ms; 0 means exact times only. At most 10s.
	TimeTolerance *units.Duration `yaml:"time_tolerance"`
	// MaxFactsPerIssue bounds the related facts (operation lines) attached to each
	// issue. 0 means 8; at most 200.
	MaxFactsPerIssue int `yaml:"max_facts_per_issue"`
	// StripClaims is carried for the revision step: auto (default), always or
	// never.
	StripClaims StripMode `yaml:"strip_claims"`
}

// Settings is a Config with its defaults applied; the zero Settings is not the
// default (use Config{}.Settings()).
type Settings struct {
	// Enabled: validation runs unless a request's variant turns it off.
	Enabled bool
	// RequireClaims: a missing claims block is Fatal, not a Warning.
	RequireClaims bool
	// TimeTolerance is the inclusive evidence time tolerance.
	TimeTolerance time.Duration
	// MaxFactsPerIssue bounds each issue's related facts (at least 1).
	MaxFactsPerIssue int
	// StripClaims is never empty.
	StripClaims StripMode
}

// Settings returns the config with its defaults applied.
func (c Config) Settings() Settings {
	s := Settings{
		Enabled:          c.Enabled == nil || *c.Enabled,
		RequireClaims:    c.RequireClaims == nil || *c.RequireClaims,
		TimeTolerance:    DefaultTimeTolerance,
		MaxFactsPerIssue: c.MaxFactsPerIssue,
		StripClaims:      c.StripClaims,
	}
	if c.TimeTolerance != nil {
		s.TimeTolerance = c.TimeTolerance.Std()
	}
	if s.MaxFactsPerIssue == 0 {
		s.MaxFactsPerIssue = DefaultMaxFactsPerIssue
	}
	if s.StripClaims == "" {
		s.StripClaims = StripAuto
	}
	return s
}

// Validate reports the first out-of-range value, naming the key and the value.
func (c Config) Validate() error {
	if c.TimeTolerance != nil && c.TimeTolerance.Std() > MaxTimeTolerance {
		return fmt.Errorf("time_tolerance: %s is more than the %s allowed", c.TimeTolerance, MaxTimeTolerance)
	}
	if c.MaxFactsPerIssue < 0 || c.MaxFactsPerIssue > MaxFactsPerIssueLimit {
		return fmt.Errorf("max_facts_per_issue: %d is out of range (1 to %d; 0 means %d)", c.MaxFactsPerIssue, MaxFactsPerIssueLimit, DefaultMaxFactsPerIssue)
	}
	switch c.StripClaims {
	case "", StripAuto, StripAlways, StripNever:
	default:
		return fmt.Errorf("strip_claims: unknown mode %q (want auto, always or never)", string(c.StripClaims))
	}
	return nil
}
