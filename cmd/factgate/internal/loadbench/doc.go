// Package loadbench is the load harness of factgate's bench, soak and
// bench-faults commands: it starts the mock upstream and the proxy (as child
// processes of the factgate binary, or in this process), drives traffic at them
// from this process and writes what it measured — throughput, latency, CPU and
// memory per target, the performance targets with PASS or MISS — to a writer.
// The commands in cmd/factgate parse the flags into its options.
package loadbench

import "github.com/factgate/factgate/proxy/mockupstream"

// Corpus is the sample a run's requests and the mock's answers are made of; the
// factgate command embeds it (cmd/factgate/demodata) and shares it with its demo.
type Corpus struct {
	// Replay is the sample operation log (about 23 KB) the validating requests
	// carry.
	Replay string
	// CleanAnswer is a correct analysis of Replay: validation finds nothing to
	// revise, so the validating route makes exactly one upstream call.
	CleanAnswer string
	// Ask is the user's question before Replay in the revision scenarios.
	Ask string
	// RevisionRules script the mock for the revision scenarios: a draft with
	// issues, then the corrected revision.
	RevisionRules func() []mockupstream.Rule
}
