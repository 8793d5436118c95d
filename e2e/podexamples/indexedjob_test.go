package podexamples

import (
	"fmt"
	"testing"
)

// TestIndexedJob runs Metacontroller's examples/indexedjob/test.sh: an
// IndexedJob owns its pods directly (no Job), two at a time, each with its
// index, until ten have succeeded. The pod stack completes a pod whose
// container would exit (restartPolicy OnFailure or Never) as a kubelet
// would see it exit 0. test.sh's last step, `kubectl logs print-index-9`
// printing 9, is left out: no container runs, so there are no logs; the
// index it would print, the pod's JOB_INDEX, is checked instead.
func TestIndexedJob(t *testing.T) {
	ex := installExample(t, "indexedjob", "v1")
	ij := []string{"indexedjobs", "print-index"}
	ex.untilServed(t, "indexedjobs")
	ex.applyFile(t, "my-indexedjob.yaml")

	ex.until(t, ij, "{.status.succeeded}", "10")
	for i := 0; i < 10; i++ {
		pod := []string{"pod", fmt.Sprintf("print-index-%d", i)}
		ex.until(t, pod, "{.status.phase}", "Succeeded")
		ex.until(t, pod, `{.spec.containers[0].env[?(@.name=="JOB_INDEX")].value}`, fmt.Sprint(i))
	}
	ex.until(t, ij, "{.status.conditions[0].status}", "True")
}
