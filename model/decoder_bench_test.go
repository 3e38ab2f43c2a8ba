package model

import (
	"testing"

	"github.com/flashgo/flashgo/model/gguf"
)

// BenchmarkStoriesDecode measures one decode step of stories260K at a
// context of about 100 tokens.
func BenchmarkStoriesDecode(b *testing.B) {
	for _, threads := range []int{1, 0} {
		name := "threads=1"
		if threads == 0 {
			name = "threads=GOMAXPROCS"
		}
		b.Run(name, func(b *testing.B) {
			f, err := gguf.Open(storiesPath)
			if err != nil {
				b.Skipf("test model %s not available (%v); set FLASHGO_MODEL to its path, or README.md (\"The test model\") says how to download it", storiesPath, err)
			}
			defer f.Close()
			m, err := Load(f)
			if err != nil {
				b.Fatal(err)
			}
			s, err := m.NewSession(SessionOptions{Threads: threads, MaxContext: 256})
			if err != nil {
				b.Fatal(err)
			}
			prompt := m.Tokenizer.Encode("Once upon a time, there was a little girl named Lily. She loved to play outside in the park.", true)
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				if s.Pos() > 200 {
					s.Reset()
					if _, err := s.Forward(prompt); err != nil {
						b.Fatal(err)
					}
				}
				if _, err := s.Forward([]int{403}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkStoriesPrefill measures the prefill of a 64-token prompt.
func BenchmarkStoriesPrefill(b *testing.B) {
	f, err := gguf.Open(storiesPath)
	if err != nil {
		b.Skipf("test model %s not available (%v); set FLASHGO_MODEL to its path, or README.md (\"The test model\") says how to download it", storiesPath, err)
	}
	defer f.Close()
	m, err := Load(f)
	if err != nil {
		b.Fatal(err)
	}
	s, err := m.NewSession(SessionOptions{MaxContext: 256})
	if err != nil {
		b.Fatal(err)
	}
	ids := m.Tokenizer.Encode(storiesKnownAnswer, true)
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		s.Reset()
		if _, err := s.Forward(ids); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(len(ids))*float64(b.N)/b.Elapsed().Seconds(), "tokens/s")
}
