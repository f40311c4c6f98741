//go:build race

package gateway

// RaceEnabled: the tests run under the race detector, so the gateway they
// start is built with it too, and stops at its first data race.
const RaceEnabled = true
