//go:build race

package interceptors

// poisonReleased fills released buffers with poisonByte in race-enabled builds
// (the -race test runs), so that a read of a buffer after Release returned it —
// a phase's goroutine that forgot to Hold the exchange — reads garbage and fails
// the test, and the race detector reports the unordered write and read.
const poisonReleased = true
