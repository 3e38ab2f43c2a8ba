//go:build !linux && !purego

package kernel

import "errors"

// requestAMXPermission is Linux's arch_prctl request (amx_linux_amd64.go);
// elsewhere the kernels do not know how the OS hands out the tile state,
// and do not use it.
func requestAMXPermission() error {
	return errors.New("flashgo asks for the tile state only on Linux")
}
