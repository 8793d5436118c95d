package framework

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// ConnectionOwner tells which of procs holds the client end of a TCP
// connection over loopback, from the server's side of it: remoteAddr is
// the client's address (an http.Request's RemoteAddr), localAddr the
// server's. A hook served by the test can so tell which replica of
// composite-apiserver called it. It reads /proc (Linux only); nil, with no
// error, when none of procs holds it.
func ConnectionOwner(remoteAddr, localAddr string, procs ...*Process) (*Process, error) {
	clientPort, err := port(remoteAddr)
	if err != nil {
		return nil, err
	}
	serverPort, err := port(localAddr)
	if err != nil {
		return nil, err
	}
	inode, err := socketInode(clientPort, serverPort)
	if err != nil {
		return nil, err
	}
	want := "socket:[" + inode + "]"
	for _, p := range procs {
		if p == nil {
			continue
		}
		dir := fmt.Sprintf("/proc/%d/fd", p.Pid())
		fds, err := os.ReadDir(dir)
		if err != nil {
			// An exited process holds nothing.
			continue
		}
		for _, fd := range fds {
			if link, err := os.Readlink(filepath.Join(dir, fd.Name())); err == nil && link == want {
				return p, nil
			}
		}
	}
	return nil, nil
}

func port(addr string) (string, error) {
	_, p, err := net.SplitHostPort(addr)
	if err != nil {
		return "", fmt.Errorf("can't read the port of %q: %w", addr, err)
	}
	n, err := strconv.Atoi(p)
	if err != nil {
		return "", fmt.Errorf("can't read the port of %q: %w", addr, err)
	}
	// As /proc/net/tcp writes ports: four upper-case hex digits.
	return fmt.Sprintf("%04X", n), nil
}

// socketInode is the inode of the socket whose local port is from and
// remote port to, from /proc/net/tcp and tcp6 ("sl local rem st ... inode";
// addresses as HEXIP:HEXPORT).
func socketInode(from, to string) (string, error) {
	for _, table := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		data, err := os.ReadFile(table)
		if err != nil {
			return "", fmt.Errorf("can't read the sockets: %w", err)
		}
		for _, line := range strings.Split(string(data), "\n")[1:] {
			f := strings.Fields(line)
			if len(f) < 10 {
				continue
			}
			if strings.HasSuffix(f[1], ":"+from) && strings.HasSuffix(f[2], ":"+to) && f[9] != "0" {
				return f[9], nil
			}
		}
	}
	return "", fmt.Errorf("no socket from port %s to port %s", from, to)
}
