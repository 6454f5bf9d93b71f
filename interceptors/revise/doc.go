// Package revise is the hidden revision (PRODUCT.md §9, seed 001's "Validation
// Philosophy"): a response phase that runs after validation and, when the draft
// has an issue at or above the route's threshold, silently has the model revise
// its answer before the client sees anything.
//
// # What it does
//
//   - Repair: when the draft has no claims block (Fatal claims.missing), one
//     request asks only for the block (the pack's repair template); the block is
//     appended to the draft after the marker and the combined answer is validated.
//   - Revision: a request built from the original outgoing request (which already
//     carries the injected system prompt) plus the latest eligible attempt as the
//     assistant turn and one user turn rendered from the pack's revision template:
//     the numbered issues (most severe first; every issue from WeakEvidence up,
//     or from the threshold when it is lower) with their recommendations, and the
//     relevant facts (RelevantFacts). No history grows: each revision is built from
//     the original messages and one answer.
//   - Bounds: max_revisions calls (the repair is not counted), a wall-clock budget
//     for all hidden calls, and an early stop when a revision has the same issues
//     (Issue.Key) as the answer it revised.
//   - Best attempt: an attempt that adds contradictions the draft did not have, or
//     drops a claim nobody flagged (unitId+claim, or the claim text), may not win;
//     then a revision that leaks (revision.leak: a pack leak phrase its prose holds
//     more often than the draft's) loses to any that does not; then the fewest
//     issues by severity, most severe first; the earlier attempt on a tie.
//   - Downgrade: when flags remain in the returned attempt — an accepted draft's
//     too, under downgrade below_threshold — each flagged claim gets the
//     recommended evidence level (never a higher one), alternatives and player,
//     loses the evidence items the facts contradict (listed in needsConfirmation
//     as unverified) and keeps the contract (a hedged unit claim names
//     alternatives or what would confirm it), edited into the claims JSON with
//     sjson; a claim no edit makes honest (its issue recommends removing it:
//     unit.not_observed, asset.unknown) is removed from the block. The prose is
//     untouched. The edited answer is validated again and
//     what the edit exposed is downgraded too (settle).
//   - Notice: when a problem survived into the text the reader sees, the pack's
//     notice names each such claim and what the facts say: after the answer's
//     text (notice append), in X-Factgate-Notice (header, and for an answer that
//     must be JSON) or only in the trace (none).
//   - Finalize: the claims block is stripped when the proxy injected the contract
//     (strip_claims auto), always or never; the revision calls' usage is added to
//     the exchange's; headers X-Factgate-Revisions, X-Factgate-Issues (draft,
//     final and delivered counts) and X-Factgate-Notice; the trace's attempts,
//     final outcome, downgrades and notice; metrics (of the answer as delivered).
//
// # Failure
//
// It fails open. A hidden call that times out, fails, answers non-2xx or with a
// body that is not JSON or has no content ends the loop; the best attempt so far
// is returned (downgraded), with status 200, and the trace says why. A client that
// goes away cancels the call in flight (the proxy's context) and the request ends.
package revise
