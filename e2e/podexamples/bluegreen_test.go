package podexamples

import "testing"

// TestBlueGreen runs Metacontroller's examples/bluegreen/test.sh: a
// BlueGreenDeployment owns a Service and two ReplicaSets (InPlace), keeps
// one color active with every replica available (minReadySeconds 5) and
// switches the Service to the other color once that one's ReplicaSet is
// available, on each change of the template. test.sh compares the colors
// with bash's -eq, which holds for any two words; here they are compared.
func TestBlueGreen(t *testing.T) {
	ex := installExample(t, "bluegreen", "v1")
	bgd := []string{"bluegreendeployments", "nginx"}
	ex.untilServed(t, "bluegreendeployments")
	ex.applyFile(t, "my-bluegreen.yaml")

	active := func(color, other string) {
		t.Helper()
		ex.until(t, []string{"rs", "nginx-" + color}, "{.status.readyReplicas}", "3")
		ex.until(t, []string{"rs", "nginx-" + other}, "{.status.replicas}", "0")
		ex.until(t, bgd, "{.status.activeColor}", color)
		ex.until(t, bgd, "{.status.active.availableReplicas}", "3")
		ex.until(t, []string{"service", "nginx-frontend"}, "{.spec.selector.color}", color)
		generation, err := ex.jsonpath(bgd, "{.metadata.generation}")
		if err != nil {
			t.Fatal(err)
		}
		ex.until(t, bgd, "{.status.observedGeneration}", generation)
	}
	active("blue", "green")

	ex.kubectl(t, "patch", "bluegreendeployments", "nginx", "--type=merge", "-p", `{"spec":{"template":{"metadata":{"labels":{"new":"label"}}}}}`)
	active("green", "blue")

	ex.kubectl(t, "patch", "bluegreendeployments", "nginx", "--type=merge", "-p", `{"spec":{"template":{"metadata":{"labels":{"new2":"label2"}}}}}`)
	active("blue", "green")
}
