package standalone

import (
	"os/exec"
	"syscall"
)

// setProcAttr kills the server if the test binary dies without stopping it
// (a panic, a -timeout), so that no server outlives the tests.
func setProcAttr(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
