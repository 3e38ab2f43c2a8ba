package attention

// SetPrepack turns the bf16 prefill's packing of K and V once per call on
// or off, for tests that compare it with packing every tile, and returns
// the function that restores the setting.
func SetPrepack(on bool) (restore func()) {
	prev := prepackEnabled
	prepackEnabled = on
	return func() { prepackEnabled = prev }
}
