//go:build !race

package bufpool

// Poisons: see poison_race.go. Off in ordinary builds, where filling a returned
// buffer would only cost time.
const Poisons = false
