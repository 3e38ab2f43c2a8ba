//go:build race

package attention_test

// raceEnabled shrinks the test grid under the race detector, which slows the
// scalar loops by an order of magnitude; every code path still runs.
const raceEnabled = true
