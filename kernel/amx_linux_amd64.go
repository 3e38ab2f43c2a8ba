//go:build !purego

package kernel

import "syscall"

// Linux (5.16 and later) enables the AMX tile data in XCR0 but arms the
// extended feature disable (XFD) for it in every process: the first tile
// instruction a thread runs traps (#NM), and the kernel then allocates the
// larger XSAVE buffer the tiles need only if the process has asked for
// them with arch_prctl(ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA); otherwise
// it sends the thread SIGILL (ILL_ILLOPC), which kills a Go program
// (arch/x86/kernel/traps.c, handle_xfd_event; Documentation/arch/x86/
// xstate.rst). The permission is the process's, for all its threads, and
// is refused (ENOSPC) while a thread has an alternate signal stack too
// small for a signal frame holding the tiles; Go's signal stacks are 32
// KiB, the frame about 11 KiB.
const (
	archReqXcompPerm  = 0x1023 // ARCH_REQ_XCOMP_PERM (0x1022 is ARCH_GET_XCOMP_PERM)
	xfeatureXTileData = 18     // XFEATURE_XTILEDATA, XCR0 bit 18
)

// requestAMXPermission asks Linux for the tile data state once, at package
// initialisation (before any tile instruction can run: see amxErr).
func requestAMXPermission() error {
	_, _, e := syscall.RawSyscall(syscall.SYS_ARCH_PRCTL, archReqXcompPerm, xfeatureXTileData, 0)
	if e != 0 {
		return e
	}
	return nil
}
