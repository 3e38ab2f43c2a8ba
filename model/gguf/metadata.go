package gguf

import (
	"fmt"
	"math"
	"strings"
)

// ValueType is the type code of a GGUF metadata value.
type ValueType uint32

// The GGUF metadata value types, with the codes the format gives them.
const (
	ValueUint8   ValueType = 0  // uint8
	ValueInt8    ValueType = 1  // int8
	ValueUint16  ValueType = 2  // uint16
	ValueInt16   ValueType = 3  // int16
	ValueUint32  ValueType = 4  // uint32
	ValueInt32   ValueType = 5  // int32
	ValueFloat32 ValueType = 6  // float32
	ValueBool    ValueType = 7  // bool: one byte, 0 or 1
	ValueString  ValueType = 8  // string: uint64 length, then UTF-8 bytes
	ValueArray   ValueType = 9  // array: element type, uint64 count, elements
	ValueUint64  ValueType = 10 // uint64
	ValueInt64   ValueType = 11 // int64
	ValueFloat64 ValueType = 12 // float64
)

var valueTypeNames = [...]string{
	ValueUint8: "uint8", ValueInt8: "int8", ValueUint16: "uint16", ValueInt16: "int16",
	ValueUint32: "uint32", ValueInt32: "int32", ValueFloat32: "float32", ValueBool: "bool",
	ValueString: "string", ValueArray: "array", ValueUint64: "uint64", ValueInt64: "int64",
	ValueFloat64: "float64",
}

// String returns the type's name, such as "uint32", or "ValueType(N)" for an
// unknown code.
func (t ValueType) String() string {
	if int(t) < len(valueTypeNames) {
		return valueTypeNames[t]
	}
	return fmt.Sprintf("ValueType(%d)", uint32(t))
}

// minSize is the fewest bytes a value of type t takes in a file, or 0 for an
// unknown type.
func (t ValueType) minSize() int {
	switch t {
	case ValueUint8, ValueInt8, ValueBool:
		return 1
	case ValueUint16, ValueInt16:
		return 2
	case ValueUint32, ValueInt32, ValueFloat32:
		return 4
	case ValueUint64, ValueInt64, ValueFloat64, ValueString:
		return 8
	case ValueArray:
		return 4 + 8
	}
	return 0
}

// isInteger reports whether t is one of the eight integer types.
func (t ValueType) isInteger() bool {
	switch t {
	case ValueUint8, ValueInt8, ValueUint16, ValueInt16, ValueUint32, ValueInt32, ValueUint64, ValueInt64:
		return true
	}
	return false
}

// Value is one GGUF metadata value. The zero Value has no type and holds
// nothing.
type Value struct {
	typ  ValueType
	elem ValueType
	x    any
}

// Type returns the value's type.
func (v Value) Type() ValueType { return v.typ }

// ElemType returns the element type of an array value. It is meaningless for
// other values.
func (v Value) ElemType() ValueType { return v.elem }

// Len returns the number of elements of an array value, or 0 for a scalar.
func (v Value) Len() int {
	if v.typ != ValueArray {
		return 0
	}
	switch s := v.x.(type) {
	case []uint8:
		return len(s)
	case []int8:
		return len(s)
	case []uint16:
		return len(s)
	case []int16:
		return len(s)
	case []uint32:
		return len(s)
	case []int32:
		return len(s)
	case []float32:
		return len(s)
	case []bool:
		return len(s)
	case []string:
		return len(s)
	case []uint64:
		return len(s)
	case []int64:
		return len(s)
	case []float64:
		return len(s)
	case []Value:
		return len(s)
	}
	return 0
}

// Any returns the value as the Go type matching its [ValueType]: uint8, int8,
// uint16, int16, uint32, int32, float32, bool, string, uint64, int64 or
// float64 for scalars, and for arrays a slice of the element type ([]uint8 …
// []float64, []bool, []string) or, for arrays of arrays, []Value. Slices are
// shared with the File and must not be modified.
func (v Value) Any() any { return v.x }

// String formats the value for people to read; long arrays are abbreviated.
func (v Value) String() string {
	if v.typ != ValueArray {
		if s, ok := v.x.(string); ok {
			return fmt.Sprintf("%q", s)
		}
		return fmt.Sprint(v.x)
	}
	const show = 8
	var b strings.Builder
	fmt.Fprintf(&b, "[%d×%v", v.Len(), v.elem)
	for i := 0; i < v.Len() && i < show; i++ {
		if i == 0 {
			b.WriteString(": ")
		} else {
			b.WriteString(" ")
		}
		b.WriteString(v.index(i).String())
	}
	if v.Len() > show {
		b.WriteString(" …")
	}
	b.WriteString("]")
	return b.String()
}

// index returns element i of an array value as a Value.
func (v Value) index(i int) Value {
	var x any
	switch s := v.x.(type) {
	case []uint8:
		x = s[i]
	case []int8:
		x = s[i]
	case []uint16:
		x = s[i]
	case []int16:
		x = s[i]
	case []uint32:
		x = s[i]
	case []int32:
		x = s[i]
	case []float32:
		x = s[i]
	case []bool:
		x = s[i]
	case []string:
		x = s[i]
	case []uint64:
		x = s[i]
	case []int64:
		x = s[i]
	case []float64:
		x = s[i]
	case []Value:
		return s[i]
	}
	return Value{typ: v.elem, x: x}
}

// int64 returns an integer value of any width and signedness as an int64 if
// it fits.
func (v Value) int64() (int64, bool) {
	switch x := v.x.(type) {
	case uint8:
		return int64(x), true
	case int8:
		return int64(x), true
	case uint16:
		return int64(x), true
	case int16:
		return int64(x), true
	case uint32:
		return int64(x), true
	case int32:
		return int64(x), true
	case uint64:
		if x > math.MaxInt64 {
			return 0, false
		}
		return int64(x), true
	case int64:
		return x, true
	}
	return 0, false
}

// uint64 returns a non-negative integer value of any width and signedness
// as a uint64.
func (v Value) uint64() (uint64, bool) {
	if x, ok := v.x.(uint64); ok {
		return x, true
	}
	i, ok := v.int64()
	if !ok || i < 0 {
		return 0, false
	}
	return uint64(i), true
}

// Keys returns the metadata keys in file order.
func (f *File) Keys() []string {
	return append([]string(nil), f.keys...)
}

// Value returns the metadata value stored under key.
func (f *File) Value(key string) (Value, bool) {
	v, ok := f.values[key]
	return v, ok
}

// Has reports whether the metadata has key.
func (f *File) Has(key string) bool {
	_, ok := f.values[key]
	return ok
}

func (f *File) lookup(key string) (Value, error) {
	v, ok := f.values[key]
	if !ok {
		return Value{}, fmt.Errorf("gguf: metadata key %q: %w", key, ErrNotFound)
	}
	return v, nil
}

func typeError(key string, v Value, want string) error {
	if v.typ == ValueArray {
		return fmt.Errorf("gguf: %w: metadata %q is an array of %v, want %s", ErrFormat, key, v.elem, want)
	}
	return fmt.Errorf("gguf: %w: metadata %q is %v %v, want %s", ErrFormat, key, v.typ, v, want)
}

// String returns the string stored under key. A missing key gives an error
// wrapping [ErrNotFound]; a value of another type, one wrapping [ErrFormat].
func (f *File) String(key string) (string, error) {
	v, err := f.lookup(key)
	if err != nil {
		return "", err
	}
	s, ok := v.x.(string)
	if !ok {
		return "", typeError(key, v, "string")
	}
	return s, nil
}

// Int returns the integer stored under key. Any of the eight integer types
// is accepted if the value fits in an int.
func (f *File) Int(key string) (int, error) {
	v, err := f.lookup(key)
	if err != nil {
		return 0, err
	}
	i, ok := v.int64()
	if !ok || i < math.MinInt || i > math.MaxInt {
		return 0, typeError(key, v, "an integer that fits in int")
	}
	return int(i), nil
}

// Uint32 returns the integer stored under key. Any of the eight integer types
// is accepted if the value fits in a uint32.
func (f *File) Uint32(key string) (uint32, error) {
	v, err := f.lookup(key)
	if err != nil {
		return 0, err
	}
	u, ok := v.uint64()
	if !ok || u > math.MaxUint32 {
		return 0, typeError(key, v, "an integer that fits in uint32")
	}
	return uint32(u), nil
}

// Uint64 returns the non-negative integer stored under key, of any of the
// eight integer types.
func (f *File) Uint64(key string) (uint64, error) {
	v, err := f.lookup(key)
	if err != nil {
		return 0, err
	}
	u, ok := v.uint64()
	if !ok {
		return 0, typeError(key, v, "a non-negative integer")
	}
	return u, nil
}

// Float32 returns the floating-point number stored under key; a float64 is
// rounded to float32.
func (f *File) Float32(key string) (float32, error) {
	v, err := f.lookup(key)
	if err != nil {
		return 0, err
	}
	switch x := v.x.(type) {
	case float32:
		return x, nil
	case float64:
		return float32(x), nil
	}
	return 0, typeError(key, v, "float32")
}

// Bool returns the boolean stored under key.
func (f *File) Bool(key string) (bool, error) {
	v, err := f.lookup(key)
	if err != nil {
		return false, err
	}
	b, ok := v.x.(bool)
	if !ok {
		return false, typeError(key, v, "bool")
	}
	return b, nil
}

// StringArray returns a copy of the array of strings stored under key.
func (f *File) StringArray(key string) ([]string, error) {
	v, err := f.lookup(key)
	if err != nil {
		return nil, err
	}
	s, ok := v.x.([]string)
	if !ok {
		return nil, typeError(key, v, "an array of strings")
	}
	return append([]string(nil), s...), nil
}

// Float32Array returns the array of float32 (or float64, rounded) stored
// under key, as a new slice.
func (f *File) Float32Array(key string) ([]float32, error) {
	v, err := f.lookup(key)
	if err != nil {
		return nil, err
	}
	switch s := v.x.(type) {
	case []float32:
		return append([]float32(nil), s...), nil
	case []float64:
		out := make([]float32, len(s))
		for i, x := range s {
			out[i] = float32(x)
		}
		return out, nil
	}
	return nil, typeError(key, v, "an array of float32")
}

// Int32Array returns the array of integers stored under key as a new slice
// of int32. Elements may have any of the eight integer types but must fit in
// an int32.
func (f *File) Int32Array(key string) ([]int32, error) {
	v, err := f.lookup(key)
	if err != nil {
		return nil, err
	}
	if v.typ != ValueArray || !v.elem.isInteger() {
		return nil, typeError(key, v, "an array of integers")
	}
	if s, ok := v.x.([]int32); ok {
		return append([]int32(nil), s...), nil
	}
	out := make([]int32, v.Len())
	for i := range out {
		x, ok := v.index(i).int64()
		if !ok || x < math.MinInt32 || x > math.MaxInt32 {
			return nil, typeError(key, v, "an array of integers that fit in int32")
		}
		out[i] = int32(x)
	}
	return out, nil
}
