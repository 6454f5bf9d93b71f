package knowledge

import (
	"github.com/google/cel-go/cel"
)

// The variables every rule's CEL expressions see (docs/validation.md).
const (
	// RuleVarClaim is the claim a rule runs on: its declared fields by name, and
	// path, level (the canonical English level) and evidence (its items).
	RuleVarClaim = "claim"
	// RuleVarItem is the evidence item an evidence rule runs on: type, time,
	// params, raw, structured, path, verified.
	RuleVarItem = "item"
	// RuleVarFacts is what the request's facts are as a whole: present (the
	// request has facts), end (the end of the log) and tolerance (the time
	// tolerance of a citation).
	RuleVarFacts = "facts"
)

// RuleFunc declares one function of the rule language: its name, its overloads'
// parameter and result types and what it means. The declarations live here so a
// pack's rules compile (and fail at load) without the facts; package
// interceptors/validate binds each overload to its implementation.
type RuleFunc struct {
	// Name is the function's name in CEL ("observed").
	Name string
	// Overload identifies the overload ("observed_int").
	Overload string
	// Args and Result are the overload's types.
	Args   []*cel.Type
	Result *cel.Type
	// Doc says what it returns.
	Doc string
}

var (
	tStr      = cel.StringType
	tInt      = cel.IntType
	tBool     = cel.BoolType
	tDyn      = cel.DynType
	tDur      = cel.DurationType
	tStrList  = cel.ListType(cel.StringType)
	tDynList  = cel.ListType(cel.DynType)
	tDynEntry = cel.DynType
)

// RuleFuncs are the functions every pack's rules may call, in documentation
// order.
var RuleFuncs = []RuleFunc{
	// Facts: the operation log.
	{"observed", "observed_int", []*cel.Type{tInt}, tBool, "the unit appears on some operation line"},
	{"owners", "owners_int", []*cel.Type{tInt}, tStrList, "the players on whose lines the unit appears, in order of appearance"},
	{"unit_powers", "unit_powers_int", []*cel.Type{tInt}, tStrList, "the special powers the unit used, each once, in order of first use"},
	{"used_power", "used_power_int_string", []*cel.Type{tInt, tStr}, tBool, "the unit used that power"},
	{"acted_as", "acted_as_int_string", []*cel.Type{tInt, tStr}, tBool, "the unit appears in an operation of a kind with that role (builder, producer, power, sell)"},
	{"first_seen", "first_seen_int", []*cel.Type{tInt}, tDyn, "the time of the unit's first operation (a duration), or null"},
	{"first_production", "first_production_string_string", []*cel.Type{tStr, tStr}, tDyn, "the time the player first produced the asset (an operation of a producer kind), or null"},
	{"is_player", "is_player_string", []*cel.Type{tStr}, tBool, "the name is a player of the request (its players list or an operation line)"},
	{"has_role", "has_role_dyn_string", []*cel.Type{tDyn, tStr}, tBool, "operations of the kind of an evidence item (or of an evidence type) have that role"},
	{"cites", "cites_dyn", []*cel.Type{tDyn}, tBool, "the evidence item matches an operation of the facts (its type, time within the tolerance, its parameters)"},
	{"nearest", "nearest_dyn", []*cel.Type{tDyn}, tDyn, "the text of the operation the facts have closest to an evidence item that matches none, or null"},
	{"item_field", "item_field_dyn_string", []*cel.Type{tDyn, tStr}, tStr, "the evidence item's parameter the pack compares with that operation field (unit, asset, power...), or \"\""},
	{"unit_items", "unit_items_dyn", []*cel.Type{tDyn}, tDynList, "the claim's evidence items the facts confirm (verified) whose unit parameter is the claim's unitId"},
	{"item_unit", "item_unit_dyn", []*cel.Type{tDyn}, tDyn, "the evidence item's unit parameter as an int, or null"},
	{"record", "record_string_string", []*cel.Type{tStr, tStr}, tDyn, "the record of the set with that key (a map of its fields), or null"},
	{"records", "records_string", []*cel.Type{tStr}, tDynList, "every record of the set, in order"},
	// Knowledge: the request's knowledge set, by scope.
	{"scope_of", "scope_of_string", []*cel.Type{tStr}, tStr, "the player's value in the pack's players dimension (its faction), or \"\""},
	{"knows_scope", "knows_scope_string", []*cel.Type{tStr}, tBool, "the knowledge set has entries for that scope"},
	{"asset", "asset_string_string", []*cel.Type{tStr, tStr}, tDynEntry, "the knowledge entry with that name in the scope (fields id, tags), or null"},
	{"has_tag", "has_tag_dyn_string", []*cel.Type{tDynEntry, tStr}, tBool, "the knowledge entry carries the tag (false for null)"},
	{"assets_with_tag", "assets_with_tag_string_string", []*cel.Type{tStr, tStr}, tStrList, "the names of the scope's entries that carry the tag, in the set's order"},
	{"assets_with_power", "assets_with_power_string_string", []*cel.Type{tStr, tStr}, tStrList, "the names of the scope's entries that carry that special power's tag"},
	{"power_carriers", "power_carriers_string_dyn", []*cel.Type{tStr, tDyn}, tStrList, "the names of the scope's entries that carry the special power an evidence item cites (its power parameter); empty when it cites none"},
	{"mismatched_powers", "mismatched_powers_string_dyn", []*cel.Type{tStr, tDyn}, tStrList, "the special powers the claim's unit used that some entry of the scope carries and the claimed asset's entry in the scope does not (every such power when the scope has no such entry)"},
	{"carries_power", "carries_power_dyn_string", []*cel.Type{tDynEntry, tStr}, tBool, "the knowledge entry carries that special power's tag (false for null)"},
	{"any_asset_has_tag", "any_asset_has_tag_string_string", []*cel.Type{tStr, tStr}, tBool, "some entry with that name, in any scope of the set, carries the tag"},
	// Helpers.
	{"level_at_least", "level_at_least_string_string", []*cel.Type{tStr, tStr}, tBool, "the first evidence level is at least the second (ruled out < uncertain < possible < highly likely < confirmed)"},
	{"clock", "clock_duration", []*cel.Type{tDur}, tStr, "a duration as a game clock (1:24.00)"},
	{"listing", "listing_list", []*cel.Type{tStrList}, tStr, "a list joined with the pack language's separator (\", \", \"、\")"},
	{"written", "written_dyn_string", []*cel.Type{tDyn, tStr}, tStr, "the claim's field as the model wrote it (\"\" when absent)"},
}

// RuleFuncBinder returns the implementation of an overload (RuleFunc.Overload),
// or nil to declare it without one (checking only).
type RuleFuncBinder func(overload string) cel.OverloadOpt

// NewRuleEnv returns the CEL environment of the rule language: the variables
// claim, item and facts, every RuleFuncs function, and the let names given
// (all dynamic). bind supplies the implementations; nil declares only.
func NewRuleEnv(bind RuleFuncBinder, lets ...string) (*cel.Env, error) {
	opts := []cel.EnvOption{
		cel.Variable(RuleVarClaim, cel.DynType),
		cel.Variable(RuleVarItem, cel.DynType),
		cel.Variable(RuleVarFacts, cel.DynType),
	}
	for _, l := range lets {
		opts = append(opts, cel.Variable(l, cel.DynType))
	}
	for _, f := range RuleFuncs {
		o := []cel.OverloadOpt{}
		if bind != nil {
			if b := bind(f.Overload); b != nil {
				o = append(o, b)
			}
		}
		opts = append(opts, cel.Function(f.Name, cel.Overload(f.Overload, f.Args, f.Result, o...)))
	}
	return cel.NewEnv(opts...)
}
