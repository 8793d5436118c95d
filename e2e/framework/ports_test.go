package framework

import (
	"net"
	"os"
	"strconv"
	"strings"
	"testing"
)

// TestFreePortsAreBelowTheEphemeralRangeAndNeverRepeat: FreePort answers
// ports the kernel gives no outgoing connection (below
// net.ipv4.ip_local_port_range), each once, and a process can bind them.
func TestFreePortsAreBelowTheEphemeralRangeAndNeverRepeat(t *testing.T) {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		t.Skipf("no ephemeral port range to compare with: %v", err)
	}
	ephemeralLow, err := strconv.Atoi(strings.Fields(string(b))[0])
	if err != nil {
		t.Fatal(err)
	}
	seen := map[int]bool{}
	var last int
	for range 500 {
		port, err := FreePort()
		if err != nil {
			t.Fatal(err)
		}
		if port < 1024 || (ephemeralLow > 2048 && port >= ephemeralLow) {
			t.Fatalf("FreePort answered %d; the ephemeral range starts at %d", port, ephemeralLow)
		}
		if seen[port] {
			t.Fatalf("FreePort answered %d twice", port)
		}
		seen[port], last = true, port
	}
	l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(last))
	if err != nil {
		t.Fatalf("can't bind the port FreePort answered: %v", err)
	}
	l.Close()
}
