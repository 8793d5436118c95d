package podexamples

import (
	"fmt"
	"strings"
	"testing"
)

// TestDaemonJob runs Metacontroller's examples/daemonjob/test.sh: a
// DaemonJob runs its containers once on every node, as init containers of
// a DaemonSet's pods (a pause container keeps each pod), completes when
// every node's pod is Ready, and then deletes the DaemonSet. On the pod
// stack each of kwok's nodes gets a pod.
func TestDaemonJob(t *testing.T) {
	ex := installExample(t, "daemonjob", "v1")
	dj := []string{"daemonjobs", "hello-world"}
	ex.untilServed(t, "daemonjobs")
	nodes, err := ex.jsonpath([]string{"nodes"}, "{.items[*].metadata.name}")
	if err != nil {
		t.Fatal(err)
	}
	ex.applyFile(t, "my-daemonjob.yaml")

	ex.until(t, dj, "{.status.conditions[0].status}", "True")
	// The DaemonSet's status, which the DaemonJob froze when it completed:
	// a pod scheduled and Ready on every node.
	n := fmt.Sprint(len(strings.Fields(nodes)))
	ex.until(t, dj, "{.status.desiredNumberScheduled}", n)
	ex.until(t, dj, "{.status.numberReady}", n)
	ex.untilGone(t, "daemonset", "hello-world-dj")
}
