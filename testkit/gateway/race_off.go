//go:build !race

package gateway

// RaceEnabled: see race_on_test.go.
const RaceEnabled = false
