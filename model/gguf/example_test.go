package gguf_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"log"

	"github.com/flashgo/flashgo/model/gguf"
)

// appendString appends a GGUF string: a uint64 length, then the bytes.
func appendString(b []byte, s string) []byte {
	b = binary.LittleEndian.AppendUint64(b, uint64(len(s)))
	return append(b, s...)
}

// Example reads a GGUF file built in memory: the header, one metadata pair
// and no tensors.
func Example() {
	var b []byte
	b = append(b, "GGUF"...)
	b = binary.LittleEndian.AppendUint32(b, 3) // version
	b = binary.LittleEndian.AppendUint64(b, 0) // tensors
	b = binary.LittleEndian.AppendUint64(b, 1) // metadata pairs
	b = appendString(b, "general.architecture")
	b = binary.LittleEndian.AppendUint32(b, uint32(gguf.ValueString))
	b = appendString(b, "llama")

	f, err := gguf.Read(bytes.NewReader(b), int64(len(b)))
	if err != nil {
		log.Fatal(err)
	}
	arch, err := f.String("general.architecture")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("version %d, architecture %q, %d tensors\n", f.Version(), arch, f.NumTensors())

	_, err = f.Int("llama.context_length")
	fmt.Println(errors.Is(err, gguf.ErrNotFound), err)
	// Output:
	// version 3, architecture "llama", 0 tensors
	// true gguf: metadata key "llama.context_length": not found
}

// ExampleOpen lists the tensor directory of a model file and reads one
// tensor, dequantised to float32.
func ExampleOpen() {
	f, err := gguf.Open("stories260K.gguf")
	if err != nil {
		log.Fatal(err)
	}
	defer f.Close()
	for _, t := range f.Tensors() {
		fmt.Println(t) // name, type and shape, Dims[0] innermost
	}
	embd, err := f.Float32s("token_embd.weight")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(len(embd), "values")
}
