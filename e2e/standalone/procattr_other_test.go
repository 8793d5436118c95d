//go:build !linux

package standalone

import "os/exec"

// setProcAttr has nothing to set where the parent's death can't be
// forwarded to the server.
func setProcAttr(cmd *exec.Cmd) {}
