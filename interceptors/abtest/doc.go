// Package abtest runs A/B experiments on a route's prompts (PRODUCT.md §11): it
// assigns each chat completion a variant of the route's experiment, applies the
// variant's overrides before any other stage runs, and, once every other stage has
// finished with the request, counts how the variant's answer fared — first-draft
// issues, hidden revisions, residual contradictions, downgrades, latency, tokens,
// upstream errors — in the cache, so that replicas sharing Redis aggregate.
//
// The pieces:
//
//   - Config is a route's `experiment:` block; New validates it and reads its
//     prompt files at start-up.
//   - Experiment is the interceptor, the outermost stage of the chain: its request
//     phase runs first (assignment), its response phase last (outcomes).
//   - Assignment is sticky: a subject (X-Factgate-Subject, else the body's user,
//     else the session, else the client key) is hashed with the experiment's salt
//     into the variants' weights by weighted rendezvous hashing, so the same subject
//     always gets the same variant and a weight change moves as few subjects as
//     possible. Without any subject the variant is drawn at random by weight.
//   - ReportHandler serves GET /factgate/v1/experiments: per variant the counts and
//     rates with 95% Wilson intervals, and each variant against the control with a
//     pooled two-proportion z-test (stats.go).
//
// Assignment and outcome counting fail open: a failure assigns the control (or
// skips the counters) and says so in the trace; it never fails a request.
package abtest
