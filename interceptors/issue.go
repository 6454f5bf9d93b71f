package interceptors

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Severity orders validation issues. The zero value is Info.
type Severity int

// The severities, least to most severe (seed 001's severity model).
const (
	Info Severity = iota
	WeakEvidence
	Warning
	Contradiction
	Fatal
)

var severityNames = [...]string{"Info", "WeakEvidence", "Warning", "Contradiction", "Fatal"}

// String returns the severity's stable name ("Contradiction").
func (s Severity) String() string {
	if s < Info || s > Fatal {
		return "Severity(" + strconv.Itoa(int(s)) + ")"
	}
	return severityNames[s]
}

// Short returns the one-letter form used in the X-Factgate-Issues header
// (I, E, W, C, F — E for WeakEvidence, since W is Warning).
func (s Severity) Short() string {
	return [...]string{"I", "E", "W", "C", "F"}[s]
}

// ParseSeverity reads a severity name in any case ("contradiction", "weak_evidence").
func ParseSeverity(name string) (Severity, error) {
	n := strings.ToLower(strings.NewReplacer("_", "", "-", "", " ", "").Replace(name))
	for i, s := range severityNames {
		if strings.ToLower(s) == n {
			return Severity(i), nil
		}
	}
	return 0, fmt.Errorf("unknown severity %q (want Info, WeakEvidence, Warning, Contradiction or Fatal)", name)
}

// MarshalText renders the severity's name.
func (s Severity) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// UnmarshalText parses a severity name (used by YAML and JSON config).
func (s *Severity) UnmarshalText(b []byte) error {
	v, err := ParseSeverity(string(b))
	if err != nil {
		return err
	}
	*s = v
	return nil
}

// Recommendation says how a flagged claim should change. Zero fields mean "no advice".
type Recommendation struct {
	// EvidenceLevel is the level the claim should be downgraded to ("possible").
	EvidenceLevel string `json:"evidenceLevel,omitempty"`
	// Alternatives are candidates the claim should list.
	Alternatives []string `json:"alternatives,omitempty"`
	// Player is the player the claim should name (the UnitId's owner, when the
	// claim names another player).
	Player string `json:"player,omitempty"`
	// Remove says the claim cannot be made honest by editing it — a claim about a
	// UnitId the facts never show, or an asset the knowledge does not know — and
	// should be dropped from the claims block.
	Remove bool `json:"remove,omitempty"`
	// Text is the guidance in the pack's language, sent back in a revision request.
	Text string `json:"text,omitempty"`
}

// IsZero reports whether the recommendation carries no advice.
func (r Recommendation) IsZero() bool {
	return r.EvidenceLevel == "" && len(r.Alternatives) == 0 && r.Player == "" && !r.Remove && r.Text == ""
}

// FactLine is one fact from the request's facts that an issue relates to, as it
// appears in the source text, with its time for ordering.
type FactLine struct {
	At   time.Duration `json:"at"`
	Text string        `json:"text"`
}

// Issue is one finding of a validator about an answer.
type Issue struct {
	// Code is the stable reason code ("evidence.not_in_replay").
	Code     string   `json:"code"`
	Severity Severity `json:"severity"`
	// Path locates the finding in the claims: "unitClaims[2]",
	// "eventClaims[0].evidence[1]", "unitClaims" or "" for the root.
	Path           string         `json:"path"`
	Message        string         `json:"message"`
	Recommendation Recommendation `json:"recommendation"`
	// Facts are the facts the finding relates to (bounded by the validator).
	Facts []FactLine `json:"facts,omitempty"`
	// Validator names the validator that reported the issue.
	Validator string `json:"validator,omitempty"`
	// Args are the values the pack's message templates refer to ("unit", "power",
	// "evidence", "asset"...).
	Args map[string]string `json:"args,omitempty"`
}

// Key identifies an issue for comparisons between attempts (code, severity, path).
func (i Issue) Key() string {
	return i.Code + "|" + i.Severity.String() + "|" + i.Path
}

// SeverityCounts counts issues per severity.
type SeverityCounts [Fatal + 1]int

// CountSeverities counts issues by severity.
func CountSeverities(issues []Issue) SeverityCounts {
	var c SeverityCounts
	for _, is := range issues {
		if is.Severity >= Info && is.Severity <= Fatal {
			c[is.Severity]++
		}
	}
	return c
}

// Add returns the sum of two counts (the issues of several choices).
func (c SeverityCounts) Add(o SeverityCounts) SeverityCounts {
	for s := range c {
		c[s] += o[s]
	}
	return c
}

// AtLeast returns how many issues are at or above s.
func (c SeverityCounts) AtLeast(s Severity) int {
	n := 0
	for i := s; i <= Fatal; i++ {
		n += c[i]
	}
	return n
}

// Compare orders two issue counts: most severe first, then fewer is better. It
// returns -1 when c is better (fewer severe issues) than o, 1 when worse, 0 when equal.
func (c SeverityCounts) Compare(o SeverityCounts) int {
	for s := Fatal; s >= Info; s-- {
		switch {
		case c[s] < o[s]:
			return -1
		case c[s] > o[s]:
			return 1
		}
	}
	return 0
}

// String renders the counts as in the X-Factgate-Issues header: "C2,W1" (most
// severe first; "0" when there are none).
func (c SeverityCounts) String() string {
	var b strings.Builder
	for s := Fatal; s >= Info; s-- {
		if c[s] == 0 {
			continue
		}
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		b.WriteString(s.Short())
		b.WriteString(strconv.Itoa(c[s]))
	}
	if b.Len() == 0 {
		return "0"
	}
	return b.String()
}

// MaxSeverity returns the most severe issue's severity and whether there was any.
func MaxSeverity(issues []Issue) (Severity, bool) {
	if len(issues) == 0 {
		return Info, false
	}
	m := Info
	for _, is := range issues {
		if is.Severity > m {
			m = is.Severity
		}
	}
	return m, true
}
