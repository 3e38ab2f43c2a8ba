package kernel

import (
	"math"
	"unsafe"

	"github.com/flashgo/flashgo/fp16"
)

// The implementation table. Each level (cpu.go's impl) runs one row of
// float32 kernels (f32Row) and one row of bfloat16 products (bf16Row);
// the integer kernels of QKRowsQ8Dot are rows of their own (dotRow). The
// rows an architecture has are built in table_<arch>.go, and the features
// a machine needs for each are read in cpu_<arch>.go; the generic rows
// below are the pure-Go loops every build has. The selection (cur) is made
// once at start-up and changed only by the test hooks (internal/impl).
// Arguments reaching a row are checked by the exported wrappers: every
// size is >= 1, so taking the address of element 0 is safe.

// f32Row holds the float32 kernels of a level.
type f32Row struct {
	qkt     func(s []float32, ldS int, q []float32, ldQ int, kt []float32, ldK int, rows, cols, d int, scale float32)
	pv      func(o []float32, ldO int, p []float32, ldP int, v []float32, ldV int, rows, cols, d int)
	expSum  func(dst, src []float32, max float32) float32
	max     func(x []float32) float32 // len(x) >= 1
	softCap func(dst, src []float32, c, inv float32)
	scale   func(dst, src []float32, a float32)

	packKT         func(dst []float32, ldDst int, src []float32, ldSrc int, n, d int)
	packKTFloat16  func(dst []float32, ldDst int, src []fp16.Float16, ldSrc int, n, d int)
	packKTBFloat16 func(dst []float32, ldDst int, src []fp16.BFloat16, ldSrc int, n, d int)
	packFloat16    func(dst []float32, ldDst int, src []fp16.Float16, ldSrc int, n, d int)
	packBFloat16   func(dst []float32, ldDst int, src []fp16.BFloat16, ldSrc int, n, d int)

	// fold is FoldTile in one kernel (the sums left to foldTileAsm); nil
	// where the level has none, and FoldTile runs the four kernels above
	// (foldTileGeneric).
	fold foldTileFunc

	// enc holds the encoders (encode.go); nil where the level has none,
	// and the Go loops run.
	enc *encRow

	// matMulColumns is the register block of qkt's columns (MatMulSlice
	// rounds column slices to it).
	matMulColumns int

	// The row kernels: mr rows of lanes float32s a register block (mr 0:
	// none, and the generic loops do everything), indexed by rowKind.
	// pvAnyWidth says that pvRows takes rows of any width (the last
	// vector through an opmask) rather than whole vectors. qkGather and
	// pvGather are nil where the rows of a gather go to qkRows and pvRows
	// a run of evenly spaced rows at a time.
	mr, lanes  int
	pvAnyWidth bool
	qkRows     [numRowKinds]qkRowsFunc
	pvRows     [numRowKinds]pvRowsFunc
	qkGather   [numRowKinds]qkGatherFunc
	pvGather   [numRowKinds]pvGatherFunc
}

// The row kernels' signatures: k and v point to elements of the row kind
// the table index says; ahead is in bytes.
type (
	qkRowsFunc   func(s *float32, ldS int, q *float32, ldQ int, k unsafe.Pointer, ldK int, ks *float32, rows, cols, dv int, scale float32, ahead int)
	pvRowsFunc   func(o *float32, ldO int, p *float32, ldP int, v unsafe.Pointer, ldV int, vs *float32, rows, cols, dv, ahead int)
	qkGatherFunc func(s *float32, ldS int, q *float32, ldQ int, k unsafe.Pointer, off, pfo *int, ks *float32, rows, cols, dv int, scale float32)
	pvGatherFunc func(o *float32, ldO int, p *float32, ldP int, v unsafe.Pointer, off, pfo *int, vs *float32, rows, cols, dv int)
)

// bf16Row holds the bfloat16 products of a level.
type bf16Row struct {
	qkt func(s []float32, ldS int, q []fp16.BFloat16, ldQ int, kp []fp16.BFloat16, ldK int, rows, cols, d int, scale float32)
	pv  func(o []float32, ldO int, p []fp16.BFloat16, ldP int, vp []fp16.BFloat16, ldV int, rows, cols, d int)
	// softmax is OnlineSoftmaxBF16 in one kernel, for a positive finite
	// scale and cols >= 1; nil where there is none. vecSoftmax says that
	// otherwise (a finite scale) it is softmaxBF16Vec, made of the
	// float32 row's vector kernels, rather than the generic loop.
	softmax    func(s *float32, ldS int, p *uint16, ldP int, rows, cols int, scale float32, m, z, alpha *float32)
	vecSoftmax bool
	// round is RoundBF16 on n >= 1 values; nil: the generic loop.
	round func(dst *uint16, src *float32, n int)
	// widen writes bf16Value of n >= 1 bfloat16s to dst, and widenPairs
	// that of the first and second element of each of n >= 1 pairs to
	// even and odd: the operands of the widened products (bf16_widen.go).
	widen      func(dst *float32, src *uint16, n int)
	widenPairs func(even, odd *float32, src *uint16, n int)
	// addScale sets dst[i] = a·(dst[i] + src[i]) for n >= 1 float32s: how
	// the widened QKTBF16 adds the scores of its later blocks of
	// components.
	addScale func(dst, src *float32, n int, a float32)
	// chunk is FoldChunkBF16 in one kernel, for the sizes and scales
	// fusesChunk takes; nil where the level has none.
	chunk foldChunkFunc
	// packKPairs and packVPairs pack bfloat16 keys and values into pair
	// panels (PackKPairs and PackVPairs of bfloat16 rows): keys n and
	// pairs positive multiples of 16, rowPairs >= 1 pairs of value rows
	// of d a positive multiple of 32, packVPairs reporting whether every
	// value is finite; nil: the Go loops.
	packKPairs func(dst *uint16, ldDst int, src *uint16, ldSrc int, n, pairs int)
	packVPairs func(dst *uint16, ldDst int, src *uint16, ldSrc int, rowPairs, d int) bool
}

// foldChunkFunc is the signature of FoldChunkBF16 (arguments checked).
type foldChunkFunc func(o []float32, ldO int, q []fp16.BFloat16, ldQ int, kp []fp16.BFloat16, ldK int, vp []fp16.BFloat16, ldV int,
	s []float32, ldS int, p []fp16.BFloat16, ldP int, rows, cols, d, dv int, scale float32, m, z, alpha []float32, lo, vis []int)

// dotRow holds an integer kernel of QKRowsQ8Dot, in place and gathering,
// with its rows per call; ok says whether this machine can run it.
type dotRow struct {
	name, needs string
	ok          bool
	mr          int
	rows        func(s *float32, ldS int, qp *byte, ldQP int, k *int8, ldK int, ks *float32, rows, cols, dv int, scale float32, ahead int)
	gather      func(s *float32, ldS int, qp *byte, ldQP int, k *int8, off, pfo *int, ks *float32, rows, cols, dv int, scale float32)
}

// genericF32 and genericBF16 are the rows of the generic level: the Go
// loops every kernel is tested against.
var (
	genericF32 = &f32Row{
		qkt: qktGeneric, pv: pvGeneric, expSum: expSumGeneric, max: maxGeneric,
		softCap: softCapGeneric, scale: scaleGeneric,
		packKT: packKTGeneric, packKTFloat16: packKTFloat16Generic, packKTBFloat16: packKTBFloat16Generic,
		packFloat16: packFloat16Generic, packBFloat16: packBFloat16Generic,
		matMulColumns: 16,
	}
	genericBF16 = &bf16Row{qkt: qktBF16Generic, pv: pvBF16Generic, widen: widenBF16Generic, widenPairs: widenPairsGeneric, addScale: addScaleGeneric}
)

// widenBF16Row completes w, which holds a level's softmax, rounding,
// widening and addScale kernels, into the bf16 row of a level without bf16
// instructions: the products on operands widened exactly to float32 by
// w's widening kernels, through the level's float32 kernels r
// (bf16_widen.go).
func widenBF16Row(r *f32Row, w *bf16Row) *bf16Row {
	w.qkt = func(s []float32, ldS int, q []fp16.BFloat16, ldQ int, kp []fp16.BFloat16, ldK int, rows, cols, d int, scale float32) {
		qktBF16Widen(r, w, s, ldS, q, ldQ, kp, ldK, rows, cols, d, scale)
	}
	w.pv = func(o []float32, ldO int, p []fp16.BFloat16, ldP int, vp []fp16.BFloat16, ldV int, rows, cols, d int) {
		pvBF16Widen(r, w, o, ldO, p, ldP, vp, ldV, rows, cols, d)
	}
	return w
}

// The entry points of the package's own code: each runs the kernel of the
// row selected now.

func qkt(s []float32, ldS int, q []float32, ldQ int, kt []float32, ldK int, rows, cols, d int, scale float32) {
	cur.f32.qkt(s, ldS, q, ldQ, kt, ldK, rows, cols, d, scale)
}

func pv(o []float32, ldO int, p []float32, ldP int, v []float32, ldV int, rows, cols, d int) {
	cur.f32.pv(o, ldO, p, ldP, v, ldV, rows, cols, d)
}

func expSum(dst, src []float32, max float32) float32 { return cur.f32.expSum(dst, src, max) }

func maxOf(x []float32) float32 {
	if len(x) == 0 {
		return maxGeneric(x)
	}
	return cur.f32.max(x)
}

func softCap(dst, src []float32, c, inv float32) { cur.f32.softCap(dst, src, c, inv) }

func scale(dst, src []float32, a float32) { cur.f32.scale(dst, src, a) }

func packKT(dst []float32, ldDst int, src []float32, ldSrc int, n, d int) {
	cur.f32.packKT(dst, ldDst, src, ldSrc, n, d)
}

func packKTFloat16(dst []float32, ldDst int, src []fp16.Float16, ldSrc int, n, d int) {
	cur.f32.packKTFloat16(dst, ldDst, src, ldSrc, n, d)
}

func packKTBFloat16(dst []float32, ldDst int, src []fp16.BFloat16, ldSrc int, n, d int) {
	cur.f32.packKTBFloat16(dst, ldDst, src, ldSrc, n, d)
}

func packFloat16(dst []float32, ldDst int, src []fp16.Float16, ldSrc int, n, d int) {
	cur.f32.packFloat16(dst, ldDst, src, ldSrc, n, d)
}

func packBFloat16(dst []float32, ldDst int, src []fp16.BFloat16, ldSrc int, n, d int) {
	cur.f32.packBFloat16(dst, ldDst, src, ldSrc, n, d)
}

func qktBF16(s []float32, ldS int, q []fp16.BFloat16, ldQ int, kp []fp16.BFloat16, ldK int, rows, cols, d int, scale float32) {
	cur.bf16.qkt(s, ldS, q, ldQ, kp, ldK, rows, cols, d, scale)
}

func pvBF16(o []float32, ldO int, p []fp16.BFloat16, ldP int, vp []fp16.BFloat16, ldV int, rows, cols, d int) {
	cur.bf16.pv(o, ldO, p, ldP, vp, ldV, rows, cols, d)
}

func softmaxBF16(s []float32, ldS int, p []fp16.BFloat16, ldP int, rows, cols int, scale float32, m, z, alpha []float32) {
	// The vector paths take the maximum of the scores before scaling
	// them, so they need a scale that keeps the order and makes no NaN
	// (+Inf·0): a positive finite one.
	finite := scale > 0 && scale <= math.MaxFloat32
	r := cur.bf16
	switch {
	case r.softmax != nil && finite && cols > 0:
		r.softmax(&s[0], ldS, bits16(p), ldP, rows, cols, scale, &m[0], &z[0], &alpha[0])
	case r.vecSoftmax && finite:
		softmaxBF16Vec(s, ldS, p, ldP, rows, cols, scale, m, z, alpha)
	default:
		softmaxBF16Generic(s, ldS, p, ldP, rows, cols, scale, m, z, alpha)
	}
}

// roundRowBF16 rounds len(dst) = len(src) >= 1 float32s to bfloat16
// (RoundBF16): with VCVTNEPS2BF16 where the level has AVX512-BF16, with
// integer vector instructions at avx512 and avx2.
func roundRowBF16(dst []fp16.BFloat16, src []float32) {
	if r := cur.bf16.round; r != nil {
		r(bits16(dst), &src[0], len(dst))
		return
	}
	roundRowBF16Generic(dst, src)
}

// softmaxBF16Vec is OnlineSoftmaxBF16 made of the vector kernels, for a
// positive finite scale: the row maximum (maxOf; scale·max is the maximum of the
// scaled scores, rounding being monotone), then per chunk of the row the
// scaled scores (scale), their exponentials and sum (expSum) and the
// rounding to bfloat16 (roundRowBF16). The probabilities are those of
// softmaxBF16Generic bit for bit where the vector exponential is the
// scalar one; the row sum adds them in another order.
func softmaxBF16Vec(s []float32, ldS int, p []fp16.BFloat16, ldP int, rows, cols int, sc float32, m, z, alpha []float32) {
	// Pass 1: each row's new maximum, and in alpha the exponent m − m_new
	// of its rescale factor, whose exponentials pass 2 takes in one vector
	// call (as OnlineSoftmax does). Pass 3: the probabilities and sums.
	for i := range rows {
		mNew := m[i]
		if cols > 0 {
			mNew = max(mNew, sc*maxOf(s[i*ldS:][:cols]))
		}
		if mNew == negInf {
			alpha[i] = 0 // exp(0) = 1, and no NaN from −Inf + Inf
			continue
		}
		alpha[i] = m[i] - mNew
		m[i] = mNew
	}
	expSum(alpha[:rows], alpha[:rows], 0)
	var bufA [256]float32
	buf := stackF32(bufA[:])
	for i := range rows {
		row := s[i*ldS:][:cols]
		prow := p[i*ldP:][:cols]
		if m[i] == negInf {
			clear(prow)
			continue
		}
		var sum float32
		for j := 0; j < cols; j += len(buf) {
			n := min(len(buf), cols-j)
			b := buf[:n]
			if sc == 1 {
				sum += expSum(b, row[j:j+n], m[i])
			} else {
				scale(b, row[j:j+n], sc)
				sum += expSum(b, b, m[i])
			}
			roundRowBF16(prow[j:j+n], b)
		}
		z[i] = alpha[i]*z[i] + sum
	}
}

// noescape is the runtime's: it hides a pointer from escape analysis.
//
//go:linkname noescape runtime.noescape
//go:noescape
func noescape(p unsafe.Pointer) unsafe.Pointer

// stackF32 returns a stack buffer as a slice that escape analysis does not
// follow, for the buffers the package's own code passes to a row's kernels:
// a call through a function value makes its arguments escape, and the
// kernels keep no pointer past the call.
func stackF32(s []float32) []float32 { return stackSlice(s) }

// stackSlice is stackF32 for a stack buffer of any element type.
func stackSlice[T any](s []T) []T {
	return unsafe.Slice((*T)(noescape(unsafe.Pointer(unsafe.SliceData(s)))), len(s))
}

// bits16 returns the address of the first 16-bit pattern of a half-precision slice.
func bits16[T fp16.Float16 | fp16.BFloat16](x []T) *uint16 {
	return (*uint16)(unsafe.Pointer(unsafe.SliceData(x)))
}
