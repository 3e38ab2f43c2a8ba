package kernel

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestEnvReportedOnStderr runs the test binary again with
// FLASHGO_KERNEL=bogus and checks that the package reports the unknown
// name on standard error at start-up, keeps the best implementation and
// returns the reason from EnvError.
func TestEnvReportedOnStderr(t *testing.T) {
	if os.Getenv("FLASHGO_ENV_TEST_CHILD") == "1" {
		// The child: the report was made at initialisation.
		require.ErrorContains(t, EnvError(), `FLASHGO_KERNEL="bogus" is not an implementation`)
		require.Equal(t, Implementations()[0], Implementation())
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestEnvReportedOnStderr$", "-test.count=1")
	cmd.Env = append(os.Environ(), "FLASHGO_KERNEL=bogus", "FLASHGO_ENV_TEST_CHILD=1")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		t.Skipf("cannot run the test binary again here: %v", err)
	}
	require.NoError(t, err, "child: %s%s", stdout.String(), stderr.String())
	require.Contains(t, stderr.String(), `flashgo: FLASHGO_KERNEL="bogus" is not an implementation; want one of`)
}
