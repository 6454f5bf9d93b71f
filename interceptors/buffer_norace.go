//go:build !race

package interceptors

// poisonReleased: see buffer_race.go. Off in ordinary builds, where filling a
// released buffer would only cost time.
const poisonReleased = false
