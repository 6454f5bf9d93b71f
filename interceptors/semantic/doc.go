// Package semantic holds factgate's LLM-backed semantic validators (PRODUCT.md §10,
// seed 003): checks that no index can make — whether a transcript chunk contains
// substantive active combat, for example — asked of a model under a strict
// contract and kept distinct from the model's own failures.
//
// A pack declares each validator as data (knowledge.SemanticSpec): the source text
// (the client's last user message, optionally narrowed by a regex), the proposed
// value (a gjson path into the answer's JSON object, "kind"), the policy asset
// (shared byte for byte with the producer's prompt), the instruction, the verdicts
// with their deterministic preconditions, the explanation bound and the correction
// guidance per rejecting verdict. A route opts in with its semantic block (Config),
// which names the validators and the judge's model profile (upstream, model,
// temperature, timeout, max_tokens), the execution-failure retry budget and the
// failure policy (open or closed).
//
// # The contract
//
// The judge request is a chat completion: one system message — the policy asset,
// then the instruction, identical for every call so that provider prompt caches
// reuse the prefix — then one user message with the variable input, the source text
// and the proposed value, nothing else (no chunk ids, hashes, validator keys or
// reason codes). It asks for response_format json_schema, strict, whose schema has
// exactly two properties, both required: verdict (a string enum of the spec's
// verdicts) and explanation (a string); additionalProperties false, no optional
// property, no uniqueItems. The instruction forces a best judgment: no confidence
// score, no "uncertain".
//
// # Outcomes
//
//	outcome               when                                                  issue
//	approval              the approving verdict                                 none
//	semantic rejection    a rejecting verdict consistent with the proposal      semantic.rejected, Contradiction, at the proposed value's path;
//	                                                                            recommendation = the pack's guidance (what the value must become,
//	                                                                            the explanation cut to 300 characters)
//	execution failure     malformed or extra output, unknown or inconsistent    after 1+retries calls: semantic.failed, Warning (open: the trace
//	                      verdict, blank or over-long explanation, refusal,      says validation incomplete, the answer passes) or Fatal (closed:
//	                      non-2xx, transport error, timeout; missing input       the request fails when the draft is affected)
//	                      (no call, no retry)
//
// The hidden revision (package revise) treats a semantic.rejected like any
// Contradiction: it sends the guidance back and validates the revised answer again,
// judge included, before it is accepted.
package semantic
