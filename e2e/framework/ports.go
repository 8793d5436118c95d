package framework

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
)

// FreePort returns a loopback port that was free a moment ago, for a
// process that must be told its port before it binds it (etcd,
// kube-apiserver, kube-controller-manager, kube-scheduler,
// composite-apiserver and its replicas).
//
// Between the check and the bind another socket may take the port. The
// kernel's own choice (listening on port 0) comes from the ephemeral range,
// which is where every outgoing connection of every test process on the
// machine takes its local port too: CI saw etcd and kwok fail with
// "address already in use" when a connection took theirs. So FreePort
// picks at random from the ports just below that range, which the kernel
// gives no connection, and never the same port twice in one process.
func FreePort() (int, error) {
	lo, hi := unassignedPorts()
	for range 1000 {
		port := lo + rand.IntN(hi-lo+1)
		l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port))
		if err != nil {
			continue
		}
		l.Close()
		if _, taken := handedOut.LoadOrStore(port, true); !taken {
			return port, nil
		}
	}
	return 0, fmt.Errorf("no free loopback port in %d-%d", lo, hi)
}

// handedOut are the ports FreePort has answered in this process: a port
// stays free until its process binds it, and a second check would find it
// free again (CI once saw two etcd members given one port).
var handedOut sync.Map

// unassignedPorts is a range of up to 10,000 ports below the kernel's
// ephemeral range (net.ipv4.ip_local_port_range, 32768-60999 by default).
func unassignedPorts() (lo, hi int) {
	ephemeralLow := 32768
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		if f := strings.Fields(string(b)); len(f) == 2 {
			if n, err := strconv.Atoi(f[0]); err == nil && n > 2048 {
				ephemeralLow = n
			}
		}
	}
	hi = ephemeralLow - 1
	lo = max(1024, hi-9999)
	return lo, hi
}
