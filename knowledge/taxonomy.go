package knowledge

import (
	"strings"
	"unicode"
)

// SpecialPowerPrefix starts the tag family that links an entry to an observable
// replay special power: "specialPower:SpecialPower_UnpackReplaceSelf". Any
// non-empty name without spaces may follow it.
const SpecialPowerPrefix = "specialPower:"

// The built-in tag taxonomy (ADR 0002). Validators query entries by these tags,
// never by matching natural-language text.
var (
	// CapabilityTags say what a unit can do.
	CapabilityTags = []string{"builder", "pack", "unpack", "amphibious", "transport", "returnToProducer", "cloak", "toggleWeapon"}
	// TypeTags say what a unit is.
	TypeTags = []string{"infantry", "vehicle", "aircraft", "naval", "structure", "hero", "production", "defense", "superweapon"}
	// CombatRoleTags say what a unit fights.
	CombatRoleTags = []string{"antiInfantry", "antiVehicle", "antiStructure", "antiAir", "antiNaval"}
	// RuleTags mark global rules (the ADR's own example uses "rule").
	RuleTags = []string{"rule"}
)

var builtinTags = func() map[string]struct{} {
	m := map[string]struct{}{}
	for _, group := range [][]string{CapabilityTags, TypeTags, CombatRoleTags, RuleTags} {
		for _, t := range group {
			m[t] = struct{}{}
		}
	}
	return m
}()

// BuiltinTags returns every built-in tag (without the specialPower family), in
// the taxonomy's order: capability, type, combat role, rule.
func BuiltinTags() []string {
	out := make([]string, 0, len(builtinTags))
	for _, group := range [][]string{CapabilityTags, TypeTags, CombatRoleTags, RuleTags} {
		out = append(out, group...)
	}
	return out
}

// IsBuiltinTag reports whether tag belongs to the built-in taxonomy, including a
// well-formed member of the specialPower:<Name> family.
func IsBuiltinTag(tag string) bool {
	if _, ok := builtinTags[tag]; ok {
		return true
	}
	return IsSpecialPowerTag(tag)
}

// IsSpecialPowerTag reports whether tag is "specialPower:" followed by a non-empty
// name without white space.
func IsSpecialPowerTag(tag string) bool {
	name, ok := strings.CutPrefix(tag, SpecialPowerPrefix)
	return ok && name != "" && strings.IndexFunc(name, unicode.IsSpace) < 0
}

// SpecialPowerTag returns the tag that links an entry to the special power name
// ("SpecialPower_PackReplaceSelf" -> "specialPower:SpecialPower_PackReplaceSelf").
func SpecialPowerTag(power string) string { return SpecialPowerPrefix + power }

// validExtraTag reports why a tag declared in a set's taxonomy block is not
// acceptable ("" when it is).
func validExtraTag(tag string) string {
	switch {
	case strings.TrimSpace(tag) == "":
		return "empty tag"
	case strings.IndexFunc(tag, unicode.IsSpace) >= 0:
		return "a tag must not contain white space"
	case strings.HasPrefix(tag, SpecialPowerPrefix):
		return "the specialPower: family is built in and needs no declaration"
	}
	return ""
}
