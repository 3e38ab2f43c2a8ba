//go:build !race

package impltest

const raceEnabled = false
