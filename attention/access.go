package attention

// Float32s returns the slice behind an F32 view: the whole slice given to
// F32Tensor, of which the view's elements are those its Layout reaches. It
// returns nil for an F16, BF16, Q8 or fp8 view and for the zero Tensor.
// Writing through the slice writes the view.
func (t Tensor) Float32s() []float32 {
	if t.dtype != F32 {
		return nil
	}
	return t.f32
}
