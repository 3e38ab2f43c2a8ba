//go:build !race

package attention_test

const raceEnabled = false
