// Package validate checks a model's answer deterministically: the claims block's
// format (package claims) and every rule of PRODUCT.md §8 that needs no model —
// citations against the request's facts (package facts), identities against the
// knowledge set, asked by tag (builder, specialPower:<Power>), never by asset
// name. revision.leak belongs to the revision step, semantic.* to the LLM-backed
// validators.
//
// Three ways in, one code path:
//   - Checker.Check, the pure core: an answer and an Input (fact index, knowledge
//     set, players with their factions) give sorted issues with messages in the
//     pack's language, recommendations and related facts;
//   - Validate, the route's "validate" stage (request and response phases);
//   - Offline, for `factgate check` and POST /factgate/v1/check: fact texts (one
//     log or a session's segments) and an answer, the context read from the log's
//     header as the proxy reads it.
//
// # Rules
//
// The rules are the pack's data: its rules.yaml (knowledge.RuleSet), conditions in
// CEL, run by this package's engine (engine.go): preconditions checked in Go, lets
// computed once per claim on first use, every expression planned at load into Go
// closures over plain values (engineplan.go), cel-go programs for what the planner
// does not take. A rule failing at run time is an Info rule.error and
// factgate_rule_errors_total{pack,rule}. ra3's rules.yaml expresses:
//
//	code                        severity       path        applies to
//	claim.no_evidence           WeakEvidence   claim       any claim, confirmed / highly likely, no evidence
//	claim.no_alternatives       Warning        claim       unit claim, possible / uncertain, no alternatives and no needsConfirmation
//	unit.not_observed           Warning        claim       unit claim, any level, UnitId on no operation
//	evidence.out_of_range       Contradiction  evidence    any level, time > end of facts + tolerance
//	power.not_used              Contradiction  evidence    any level, a power item whose unit never used that power
//	evidence.not_in_replay      Contradiction  evidence    any level, no operation of the type within the tolerance with every parameter
//	player.mismatch             Contradiction  claim       unit claim, any level, UnitId only on other players' lines, or player not in the replay
//	asset.unknown               Warning        claim       unit claim, any level, asset not in the player's faction scope
//	asset.power_mismatch        Contradiction  claim       unit claim, not ruled out, the unit used a power the faction has and the asset lacks
//	builder.not_observed        WeakEvidence   claim       unit claim, confirmed / highly likely, builder-tagged asset, unit never built or placed
//	evidence.ambiguous          WeakEvidence   claim       unit claim, confirmed / highly likely, only a power shared by 2+ assets of the faction identifies it
//	timeline.before_production  Contradiction  claim       unit claim, not ruled out, unit observed before the player's first production of the asset
//
// One issue per evidence item: the first of evidence.out_of_range, power.not_used,
// evidence.not_in_replay. Without facts (no line of the request is an operation)
// the fact rules stay silent and the format rules still speak; without a knowledge
// set or a player's faction, the rules judged within a faction stay silent. The
// exact semantics, with the decisions PRODUCT.md leaves open, are in
// docs/validation.md.
package validate
