// Package knowledge is factgate's domain data: knowledge sets (ADR 0002), the packs
// that hold them with their rules, contracts and templates, and the queries,
// rendering and context extraction the interceptors run on every request.
//
// A pack is data, not Go: one folder with a pack.yaml that names its knowledge sets
// (JSON), its declarative context and fact rules (regular expressions), its claims
// or answer contract, issue messages, revision templates and LLM-backed validators.
// The built-in packs (ra3, dnd) are embedded from packs/; user packs load from a
// folder (LoadRegistry). Everything is read, compiled and checked at load, so a
// broken pack fails at start-up, not on a request.
//
// The request path uses a Library: the effective set for a name (the pack's set
// with the user's overlay file applied and hot-reloaded), a render cache, and
// overlay status for /readyz. Validators ask a Set by tag (WithTag, AssetsWithTag,
// HasTag), never by matching natural-language text.
//
// The built-in RA3 sets are generated from sourced data; regenerate them with
//
//	go generate ./knowledge
package knowledge

//go:generate go run ./packs/ra3/gen -dir packs/ra3
