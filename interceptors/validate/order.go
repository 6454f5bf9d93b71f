package validate

import (
	"cmp"
	"strconv"
	"strings"

	"github.com/factgate/factgate/interceptors/claims"
)

// pathKey orders issue paths in claim order: the root, then each claims array in
// contract order; within an array the array itself, then claim by claim, each claim
// before its evidence items.
type pathKey struct {
	section  int // -1 root, 0 unitClaims, 1 eventClaims, 2 timelineClaims, 3 anything else
	claim    int // -1 the array itself
	evidence int // -1 the claim itself
	raw      string
}

var sections = [...]string{claims.UnitClaimsField, claims.EventClaimsField, claims.TimelineClaimsField}

func parsePathKey(path string) pathKey {
	k := pathKey{section: -1, claim: -1, evidence: -1, raw: path}
	if path == "" {
		return k
	}
	k.section = len(sections)
	field, rest, _ := strings.Cut(path, "[")
	for i, s := range sections {
		if s == field {
			k.section = i
		}
	}
	if rest == "" {
		return k
	}
	n, rest, ok := index(rest)
	if !ok {
		return k
	}
	k.claim = n
	if after, found := strings.CutPrefix(rest, ".evidence["); found {
		if n, _, ok := index(after); ok {
			k.evidence = n
		}
	}
	return k
}

// index reads "12]..." and returns 12 and what follows the bracket.
func index(s string) (int, string, bool) {
	end := strings.IndexByte(s, ']')
	if end <= 0 {
		return 0, s, false
	}
	n, err := strconv.Atoi(s[:end])
	if err != nil || n < 0 {
		return 0, s, false
	}
	return n, s[end+1:], true
}

func (a pathKey) compare(b pathKey) int {
	if c := cmp.Compare(a.section, b.section); c != 0 {
		return c
	}
	if c := cmp.Compare(a.claim, b.claim); c != 0 {
		return c
	}
	if c := cmp.Compare(a.evidence, b.evidence); c != 0 {
		return c
	}
	return strings.Compare(a.raw, b.raw)
}
