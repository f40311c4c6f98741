//go:build race

package main

// raceEnabled: the tests run under the race detector, so the gateway they
// start is built with it too, and stops at its first data race.
const raceEnabled = true
