package revise

import (
	"fmt"
	"time"

	"github.com/factgate/factgate/configs/units"
	"github.com/factgate/factgate/interceptors"
)

// Defaults of a route's revise block (PRODUCT.md §9).
const (
	DefaultThreshold          = interceptors.Contradiction
	DefaultMaxRevisions       = 2
	DefaultBudget             = 60 * time.Second
	DefaultRelevantFactsLines = 40
)

// Config is a route's `revise` block. The zero Config (or no block at all on a
// route that validates) means every default: revise on Contradiction, at most two
// revisions within 60s, 40 lines of relevant facts.
type Config struct {
	// Threshold is the least severe issue that triggers a revision. Nil means
	// Contradiction. An A/B variant's Overrides.Threshold replaces it per request.
	Threshold *interceptors.Severity `yaml:"threshold"`
	// MaxRevisions bounds the revision calls of one request. Nil means 2; zero
	// turns every hidden call off (no revision, no repair): a flagged draft is
	// downgraded at once. An A/B variant's Overrides.MaxRevisions replaces it.
	MaxRevisions *int `yaml:"max_revisions"`
	// Budget bounds the wall-clock time of all hidden calls of one request
	// (revisions and the repair), counted from the moment the draft was
	// validated. A call still running when it is spent is cancelled. Zero means 60s.
	Budget units.Duration `yaml:"budget"`
	// RelevantFactsLines bounds the fact lines a revision request quotes. Zero
	// means 40.
	RelevantFactsLines int `yaml:"relevant_facts_lines"`
	// Notice says how the reader learns of problems that survived: "append" (the
	// pack's notice after the answer's text), "header" (X-Factgate-Notice only) or
	// "none". Empty means append when the pack has a notice template, else none.
	// An A/B variant's Overrides.Notice replaces it per request.
	Notice NoticeMode `yaml:"notice"`
	// Downgrade says which answers get their flagged claims downgraded:
	// "below_threshold" (the default) also accepted drafts, by the recommendations
	// of their below-threshold issues, at no upstream call; "threshold_only" only
	// answers that triggered the revision.
	Downgrade DowngradeMode `yaml:"downgrade"`
}

// NoticeMode says how the reader learns of the problems that survived in an
// answer (revise.notice); the modes live in the base package, where an A/B
// variant's override is checked too.
type NoticeMode = interceptors.NoticeMode

// The notice modes (see interceptors.NoticeMode).
const (
	NoticeNone   = interceptors.NoticeNone
	NoticeAppend = interceptors.NoticeAppend
	NoticeHeader = interceptors.NoticeHeader
)

// ParseNoticeMode reads a notice mode ("none", "append", "header").
func ParseNoticeMode(s string) (NoticeMode, error) { return interceptors.ParseNoticeMode(s) }

// DowngradeMode says which answers the deterministic downgrade edits
// (revise.downgrade).
type DowngradeMode string

// The downgrade modes. The zero value means DowngradeBelowThreshold.
const (
	// DowngradeBelowThreshold downgrades every returned answer's flagged claims,
	// accepted drafts included (by the recommendations of their issues below the
	// threshold: WeakEvidence, and Warning where a recommendation exists).
	DowngradeBelowThreshold DowngradeMode = "below_threshold"
	// DowngradeThresholdOnly leaves accepted drafts as the model wrote them.
	DowngradeThresholdOnly DowngradeMode = "threshold_only"
)

// Validate reports a config error, naming the key and the offending value.
func (c *Config) Validate() error {
	if c == nil {
		return nil
	}
	if c.MaxRevisions != nil && (*c.MaxRevisions < 0 || *c.MaxRevisions > interceptors.MaxRevisionsLimit) {
		return fmt.Errorf("max_revisions: %d is out of range (want 0 to %d)", *c.MaxRevisions, interceptors.MaxRevisionsLimit)
	}
	if c.RelevantFactsLines < 0 {
		return fmt.Errorf("relevant_facts_lines: %d is negative (want 0 for the default %d, or a positive bound)", c.RelevantFactsLines, DefaultRelevantFactsLines)
	}
	if c.Threshold != nil && (*c.Threshold < interceptors.Info || *c.Threshold > interceptors.Fatal) {
		return fmt.Errorf("threshold: %v is not a severity", *c.Threshold)
	}
	if c.Notice != "" {
		if _, err := ParseNoticeMode(string(c.Notice)); err != nil {
			return fmt.Errorf("notice: %w", err)
		}
	}
	switch c.Downgrade {
	case "", DowngradeBelowThreshold, DowngradeThresholdOnly:
	default:
		return fmt.Errorf("downgrade: unknown mode %q (want below_threshold or threshold_only)", c.Downgrade)
	}
	return nil
}

// settings are a Config with its defaults applied.
type settings struct {
	threshold    interceptors.Severity
	maxRevisions int
	budget       time.Duration
	factLines    int
	notice       NoticeMode // "" until New applies the pack's default
	downgrade    DowngradeMode
}

func (c *Config) settings() settings {
	s := settings{
		threshold:    DefaultThreshold,
		maxRevisions: DefaultMaxRevisions,
		budget:       DefaultBudget,
		factLines:    DefaultRelevantFactsLines,
		downgrade:    DowngradeBelowThreshold,
	}
	if c == nil {
		return s
	}
	s.notice = c.Notice
	if c.Downgrade != "" {
		s.downgrade = c.Downgrade
	}
	if c.Threshold != nil {
		s.threshold = *c.Threshold
	}
	if c.MaxRevisions != nil {
		s.maxRevisions = *c.MaxRevisions
	}
	if c.Budget > 0 {
		s.budget = c.Budget.Std()
	}
	if c.RelevantFactsLines > 0 {
		s.factLines = c.RelevantFactsLines
	}
	return s
}

// StripMode says whether the claims block is removed from the answer the client
// receives. It mirrors the validate block's strip_claims.
type StripMode string

// The strip modes. The zero value means StripAuto.
const (
	// StripAuto removes the block when the proxy injected the claims contract (the
	// client never asked for claims) and keeps it when the client's own prompt did.
	StripAuto StripMode = "auto"
	// StripAlways always removes the block.
	StripAlways StripMode = "always"
	// StripNever always keeps the block.
	StripNever StripMode = "never"
)

func (m StripMode) valid() bool {
	switch m {
	case "", StripAuto, StripAlways, StripNever:
		return true
	}
	return false
}
