// Package claims finds, reads and edits the machine-readable claims block of a
// model's answer: the claim kinds a pack declares (knowledge.ClaimKind, pack.yaml's
// claims.kinds) — for ra3 seed 001's unitClaims, eventClaims and timelineClaims —
// with evidence levels and structured evidence "type|time|p1|p2...".
//
// Every pack's claims are read into Claims.Records (one Record per claim, its
// declared fields by name; generic.go), with the tolerance described below. A
// declaration of exactly the seed's three kinds (ra3's) is read by the typed reader
// into UnitClaims, EventClaims and TimelineClaims, its fast path, and the Records
// wrap those claims; record_diff_test.go shows the generic reader reads every ra3
// answer alike. The schema below is ra3's; another kind's fields, types, caps,
// required fields (claims.missing_field, or the kind's own code) and aliases are its
// declaration's (docs/knowledge.md, "Claim kinds").
//
// It is a pure library. The validation interceptor (interceptors/validate) parses
// every answer with a Parser and checks the claims against facts and knowledge; the
// hidden revision (interceptors/revise) uses Strip and Downgrade on the final
// answer. This package reports only format and self-consistency issues, never
// anything that needs facts or knowledge.
//
// # Locating the block
//
// With a marker (the pack's ClaimsContract.Marker, "[机器可读声明]" for RA3), the
// block is the last fenced JSON block that opens after the last occurrence of the
// marker. Fences follow CommonMark: an opening line of up to three spaces, then three
// or more backticks (or tildes) and an info string whose first word is "json" in any
// case, or no info string; a backtick info string must not contain a backtick. The
// closing line has up to three spaces, at least as many of the same character and
// nothing else but blanks. A fence never closed runs to the end of the text. Fences
// are paired from the start of the text, so a fence inside another language's fenced
// block (```python ... ```) is not mistaken for one. A fence whose body is blank is
// not a block. Fences inside list items or block quotes are not recognised.
//
// Without a marker, or without such a fence after it, the fallback scans the whole
// text once for balanced {...} groups:
//   - Outside any brace the text is prose; quotes there mean nothing.
//   - Inside braces, JSON strings (with backslash escapes), // comments and /* */
//     comments are skipped, so braces in them do not count. A string also ends at a
//     line break (JSON strings cannot hold one), so a stray quote in prose hides at
//     most the rest of its line; a /* that is never closed is not a comment.
//   - A { that is never closed is ignored; groups inside it still count. Only the
//     innermost MaxDepth open braces are tracked, so a group enclosing more than
//     MaxDepth levels is not a candidate (the groups inside it are).
//
// The groups are tried from the last closing brace to the first (so an enclosing
// group before the groups inside it). The block is the first that, after Normalize,
// parses as a JSON object holding at least one of the declared arrays (unitClaims,
// eventClaims or timelineClaims for ra3) as an array. If none does, the block is the last group that names
// one of those fields but does not parse (reported as claims.json_invalid);
// otherwise there is no block (claims.missing). So prose after the block such as
// "以上推测 {例如兵种比例} 不作保证" never displaces it, and a wrapper object
// ({"analysis": {...claims...}}) yields the claims object inside it. Trying stops
// once four times the content's length (plus 64 KiB) has been normalised, which
// keeps the fallback linear on hostile input. When the chosen group is the whole
// body of a fenced block of any info string (whitespace aside), that fence is
// recorded as well (Fenced, Fence), so Strip removes the fences with it; Span stays
// the group.
//
// # Tolerant JSON
//
// Normalize turns the block into strict JSON: it drops byte order marks, // and
// /* */ comments and trailing commas (all outside strings). Field order does not
// matter and unknown fields are ignored. When a field occurs twice in one object,
// the first occurrence counts (as for gjson and sjson, which Downgrade edits with).
// A block larger than MaxBlockBytes or nested deeper than MaxDepth is invalid.
//
// # Schema
//
// unitClaims[] items: unitId (an integer, a whole-number float such as 246.0, or a
// string of decimal digits; surrounding blanks are ignored), player, claim,
// evidenceLevel, evidence[], alternatives[], needsConfirmation[]. eventClaims[] and
// timelineClaims[] items: claim (in eventClaims, "event" is accepted when "claim" is
// absent or empty), evidenceLevel, evidence[]. A string where an array is expected
// counts as a one-item array. An array item that is not an object is kept as an empty
// claim, so paths stay aligned with the JSON; a claims field that is neither an array
// nor null is ignored.
//
// Caps (ClaimsContract.Caps, default 10/5/3) keep the first items of each array and
// drop the rest; issues are reported only for the kept items.
//
// Evidence levels: confirmed, highly likely, possible, uncertain, ruled out, in any
// ASCII case, with spaces, "_" or "-" between the words or none ("Highly_Likely",
// "RULED-OUT", "highlylikely"), plus the pack's extra spellings (ClaimsContract.Levels,
// compared the same way). Anything else, and a missing or non-string level, is
// unknown: Info claims.unknown_evidence_level, and the claim counts as Uncertain.
//
// Structured evidence is "type|time|p1|p2...": the type in any case must be one the
// pack declares (FactRules.Evidence) and be followed by exactly its number of
// parameters; the time is anything interceptors.ParseClock reads ("1:24", "1:24.00",
// "01:24.0", "75:00.5", and also "h:mm:ss[.frac]"); every part is trimmed and no
// parameter may be empty. Any other evidence string is kept unstructured, with an Info
// evidence.unstructured issue, and no fact rule applies to it. A pack that declares
// no evidence types gets no evidence.unstructured issues: all evidence is free text.
//
// # Issues
//
// Every issue's Validator is "claims" and its Message is plain English (the validator
// replaces it with the pack's message template). Args per code:
//
//	code                            severity              path                        Args
//	claims.missing                  Fatal when Required,  ""                          marker (the expected marker; "" when none)
//	                                else Warning
//	claims.json_invalid             Fatal                 ""                          error (what is wrong)
//	claims.root_not_object          Fatal                 ""                          got (array, string, number, boolean, null)
//	claims.truncated                Info                  unitClaims                  list (the array), count, cap
//	claims.field_alias              Info                  eventClaims[0]              alias ("event"), field ("claim")
//	claims.unknown_evidence_level   Info                  unitClaims[3]               level (raw value; "" when missing)
//	evidence.unstructured           Info                  unitClaims[4].evidence[0]   evidence (the raw item), reason (English)
//	unit.missing_id                 Warning               unitClaims[i]               unit (raw unitId; "" when missing), claim
//	unit.missing_claim              Warning               unitClaims[i]               unit (the UnitId, or the raw value)
//	claims.missing_field            Warning               orderClaims[i]              kind, field, claim (a declared kind's
//	                                                                                  required field, unless the kind maps it)
//
// The names match the RA3 pack's message templates (knowledge/packs/ra3/messages.yaml).
//
// # Edits
//
// Strip removes the marker and the block from an answer; Downgrade rewrites levels
// and alternatives inside the block with sjson and leaves the prose byte-identical.
package claims
