package kernel

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"testing"

	"github.com/stretchr/testify/require"

	registry "github.com/flashgo/flashgo/internal/impl"
)

// TestEnvReported runs the test binary again with FLASHGO_KERNEL=bogus
// and checks that the package keeps the best implementation, returns the
// reason through the registry (impl.EnvError) and writes nothing to
// standard error itself.
func TestEnvReported(t *testing.T) {
	if os.Getenv("FLASHGO_ENV_TEST_CHILD") == "1" {
		// The child: the reason was recorded at initialisation.
		require.ErrorContains(t, registry.EnvError(), `FLASHGO_KERNEL="bogus" is not an implementation`)
		require.Equal(t, Implementations()[0], Implementation())
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestEnvReported$", "-test.count=1")
	cmd.Env = append(os.Environ(), "FLASHGO_KERNEL=bogus", "FLASHGO_ENV_TEST_CHILD=1")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		t.Skipf("cannot run the test binary again here: %v", err)
	}
	require.NoError(t, err, "child: %s%s", stdout.String(), stderr.String())
	require.NotContains(t, stderr.String(), "FLASHGO_KERNEL", "the package wrote to standard error")
}
