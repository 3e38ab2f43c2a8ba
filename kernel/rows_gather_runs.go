package kernel

// Where the level has row kernels but no gathering ones (NEON),
// QKRowsGather and PVRowsGather run the row kernels over each run of rows
// that lie a constant stride apart.

func qkRowsGatherRuns[T RowElem](s []float32, ldS int, q []float32, ldQ int, k []T, scales []float32, off, pfo []int, rows, cols, d int, scale float32) int {
	dv := d
	gatherRuns(off, cols, func(j, n, ld int) {
		e := off[j]
		sc := rowScalesOf(k, scales, e)
		kd := qkRowsAsm(s[j:], ldS, q, ldQ, k[e:], sc, ld, rows, n, d, scale, pfo[j]-e)
		if kd < d {
			qkRowsGeneric(s[j:], ldS, q, ldQ, k[e:], sc, ld, rows, n, kd, d, scale)
		}
	})
	return dv
}

func pvRowsGatherRuns[T RowElem](o []float32, ldO int, p []float32, ldP int, v []T, scales []float32, off, pfo []int, rows, cols, d int) int {
	gatherRuns(off, cols, func(j, n, ld int) {
		e := off[j]
		sc := rowScalesOf(v, scales, e)
		if vd := pvRowsAsm(o, ldO, p[j:], ldP, v[e:], sc, ld, rows, n, d, pfo[j]-e); vd < d {
			pvRowsTail(o, ldO, p[j:], ldP, v[e:], sc, ld, rows, n, vd, d)
		}
	})
	return d
}

// gatherRuns calls f for each run of the rows of off[:cols] that lie a
// constant stride apart (n rows from key j, ld elements apart; ld is 0
// for a run of one), for architectures whose row kernels do not gather.
func gatherRuns(off []int, cols int, f func(j, n, ld int)) {
	for j := 0; j < cols; {
		n, ld := 1, 0
		if j+1 < cols && off[j+1] > off[j] {
			ld = off[j+1] - off[j]
			for n = 2; j+n < cols && off[j+n]-off[j+n-1] == ld; n++ {
			}
		}
		f(j, n, ld)
		j += n
	}
}
