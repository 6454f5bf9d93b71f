// Package scaleout proves that factgate scales out: its tests run several proxy
// replicas in one process, each on its own loopback listener, sharing a real Redis
// Cluster or a Redis Sentinel setup of redis-server processes the test starts
// (cache/redistest), and kill a master under them. Its benchmark drives the same
// traffic through one replica and through three sharing a cluster.
//
// The package has no code of its own: it is where the slow multi-process tests
// live, so that CI runs them once. They skip, saying why, where redis-server or
// redis-cli is not installed.
package scaleout
