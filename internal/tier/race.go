//go:build race

package tier

// raceEnabled: the race detector is on, and Keep keeps every cell.
const raceEnabled = true
