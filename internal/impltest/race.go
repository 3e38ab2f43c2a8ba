//go:build race

package impltest

// raceEnabled: the race detector is on, and the fast tier of
// BestAndGeneric runs the best level alone (races live in the engine's
// goroutines, which are the same at every level, and the generic level's
// loops are an order of magnitude slower under the detector).
const raceEnabled = true
