//go:build race

package bufpool

// Poisons: Put fills returned buffers with PoisonByte in race-enabled builds
// (the -race test runs), so that a read of a buffer after it went back — a
// phase's goroutine that forgot to Hold the exchange — reads garbage and fails
// the test, and the race detector reports the unordered write and read.
const Poisons = true
