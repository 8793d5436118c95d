package podexamples

import (
	"strings"
	"testing"
)

// TestServicePerPod runs Metacontroller's examples/service-per-pod/test.sh:
// two DecoratorControllers with Jsonnet hooks. One attaches a Service per
// pod of an annotated StatefulSet, the other labels each pod with its
// name. Removing the annotation removes the Services (the decorator's
// finalize hook) and the finalizer; adding it back brings them back; the
// StatefulSet's deletion waits for the finalize hook.
func TestServicePerPod(t *testing.T) {
	servicePerPod(t, "service-per-pod")
}

// TestServicePerPodV2 is examples/service-per-pod-v2/test.sh: the same
// with the hooks' version v2 request (attachments keyed namespace/name),
// which the sync hook proves by annotating the StatefulSet.
func TestServicePerPodV2(t *testing.T) {
	servicePerPod(t, "service-per-pod-v2")
}

func servicePerPod(t *testing.T, name string) {
	ex := installExample(t, name, "manifest")
	const finalizer = "metacontroller.io/service-per-pod-test"
	sts := []string{"statefulset", "nginx"}
	ex.applyFile(t, "my-statefulset.yaml")

	ex.until(t, []string{"svc", "nginx-2"}, "{.spec.selector.pod-name}", "nginx-2")
	ex.until(t, []string{"pod", "nginx-2"}, "{.metadata.labels.pod-name}", "nginx-2")
	if strings.HasSuffix(name, "-v2") {
		ex.until(t, sts, "{.metadata.annotations.v2-naming-verified}", "true")
	}

	// Opt out without deleting the StatefulSet.
	ex.kubectl(t, "annotate", "statefulset", "nginx", "service-per-pod-label-")
	ex.untilGone(t, "svc", "nginx-2")
	ex.waitForNoDecoratorFinalizer(t, sts)

	// Opt in again.
	ex.kubectl(t, "annotate", "statefulset", "nginx", "service-per-pod-label=pod-name")
	ex.until(t, []string{"svc", "nginx-2"}, "{.spec.selector.pod-name}", "nginx-2")

	// Our own finalizer, to see the deletion wait for the decorator's.
	ex.kubectl(t, "patch", "statefulset", "nginx", "--type=json", "-p", `[{"op":"add","path":"/metadata/finalizers/-","value":"`+finalizer+`"}]`)
	ex.kubectl(t, "delete", "statefulset", "nginx", "--wait=false")
	ex.untilGone(t, "svc", "nginx-2")
	ex.waitForNoDecoratorFinalizer(t, sts)
	ex.kubectl(t, "patch", "statefulset", "nginx", "--type=merge", "-p", `{"metadata":{"finalizers":[]}}`)
}

// waitForNoDecoratorFinalizer waits, as test.sh, for the decorator's
// finalizer to leave what.
func (ex *example) waitForNoDecoratorFinalizer(t *testing.T, what []string) {
	t.Helper()
	ex.waitFor(t, "the decorator's finalizer to leave "+strings.Join(what, " "), func() (bool, error) {
		f, err := ex.jsonpath(what, "{.metadata.finalizers}")
		if err != nil {
			return false, err
		}
		return !strings.Contains(f, "decoratorcontroller-service-per-pod"), nil
	})
}
