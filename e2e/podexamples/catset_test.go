package podexamples

import (
	"strings"
	"testing"
)

// TestCatSet runs Metacontroller's examples/catset/test.sh: a StatefulSet
// written as a CompositeController (Pods and PersistentVolumeClaims keyed
// Pod.v1 and PersistentVolumeClaim.v1, updateStrategy RollingRecreate on
// the Pods' Ready condition). Three Pods become Ready one after another,
// the CatSet scales to 4 and back to 2 from the highest ordinal down, and
// its finalizer scales it to 0 before it goes. Beyond test.sh: the Pods
// that stay are the same Pods throughout (a Pod carries what admission
// added, its token volume and tolerations, which the hook never returns:
// that is no reason to recreate it), and each Pod's claim is Bound.
func TestCatSet(t *testing.T) {
	ex := installExample(t, "catset", "v1")
	const finalizer = "metacontroller.io/catset-test"
	cs := []string{"catsets", "nginx-backend"}

	ex.untilServed(t, "catsets")
	ex.applyFile(t, "my-catset.yaml")

	ex.until(t, cs, "{.status.readyReplicas}", "3")
	uids := map[string]string{}
	for _, pod := range []string{"nginx-backend-0", "nginx-backend-1", "nginx-backend-2"} {
		uid, err := ex.jsonpath([]string{"pod", pod}, "{.metadata.uid}")
		if err != nil {
			t.Fatal(err)
		}
		uids[pod] = uid
		ex.until(t, []string{"pvc", "www-nginx-backend-" + pod[len(pod)-1:]}, "{.status.phase}", "Bound")
		// What admission added, which the hook never returns.
		if vols, _ := ex.jsonpath([]string{"pod", pod}, "{.spec.volumes[*].name}"); !containsPrefix(vols, "kube-api-access-") {
			t.Errorf("pod %s has volumes %q: no kube-api-access token volume (is the pod stack's ServiceAccount admission on?)", pod, vols)
		}
	}

	ex.kubectl(t, "patch", "catsets", "nginx-backend", "--type=merge", "-p", `{"spec":{"replicas":4}}`)
	ex.until(t, cs, "{.status.readyReplicas}", "4")

	ex.kubectl(t, "patch", "catsets", "nginx-backend", "--type=merge", "-p", `{"spec":{"replicas":2}}`)
	ex.until(t, cs, "{.status.readyReplicas}", "2")
	ex.untilGone(t, "pod", "nginx-backend-3")
	ex.untilGone(t, "pod", "nginx-backend-2")
	for _, pod := range []string{"nginx-backend-0", "nginx-backend-1"} {
		if uid, err := ex.jsonpath([]string{"pod", pod}, "{.metadata.uid}"); err != nil || uid != uids[pod] {
			t.Errorf("pod %s was recreated (uid %s, was %s; %v): nothing the hook returns for it changed", pod, uid, uids[pod], err)
		}
	}

	catSetRollsOnReadiness(t, ex, uids)

	// Our own finalizer, so the final state can be read.
	ex.kubectl(t, "patch", "catsets", "nginx-backend", "--type=json", "-p", `[{"op":"add","path":"/metadata/finalizers/-","value":"`+finalizer+`"}]`)
	ex.kubectl(t, "delete", "catsets", "nginx-backend", "--wait=false")
	ex.until(t, cs, "{.status.replicas}", "0")
	ex.until(t, cs, "{.metadata.finalizers}", `["`+finalizer+`"]`)
	ex.kubectl(t, "patch", "catsets", "nginx-backend", "--type=merge", "-p", `{"metadata":{"finalizers":[]}}`)
	ex.untilGone(t, cs...)
}

// catSetRollsOnReadiness changes the CatSet's template (a revision of
// spec.template: RollingRecreate of its Pods, checked on their Ready
// condition) with two Pods running. The hook answers the Pods from the
// highest ordinal down: nginx-backend-1 is recreated first, and
// nginx-backend-0 only once the new nginx-backend-1 is Ready. A template
// whose Pods can never be scheduled (a nodeSelector no node matches) stops
// the rollout at its first Pod: the CatSet's Updated condition says it
// waits for that Pod's Ready condition, and nginx-backend-0 stays as it
// was. Reverting the template resumes the rollout to the end.
func catSetRollsOnReadiness(t *testing.T, ex *example, uids map[string]string) {
	cs := []string{"catsets", "nginx-backend"}
	image := func(pod string) string {
		got, _ := ex.jsonpath([]string{"pod", pod}, "{.spec.containers[0].image}")
		return got
	}
	ex.kubectl(t, "patch", "catsets", "nginx-backend", "--type=merge", "-p", `{"spec":{"template":{"spec":{"containers":[{"name":"nginx","image":"nginx:1.27.0"}]}}}}`)
	ex.waitFor(t, "both Pods recreated with nginx:1.27.0 and Ready", func() (bool, error) {
		ready, err := ex.jsonpath(cs, "{.status.readyReplicas}")
		return image("nginx-backend-0") == "nginx:1.27.0" && image("nginx-backend-1") == "nginx:1.27.0" && ready == "2", err
	})
	ex.until(t, cs, `{.status.conditions[?(@.type=="Updated")].reason}`, "OnLatestRevision")
	readyAt, err := ex.jsonpath([]string{"pod", "nginx-backend-1"}, `{.status.conditions[?(@.type=="Ready")].lastTransitionTime}`)
	if err != nil {
		t.Fatal(err)
	}
	createdAt, err := ex.jsonpath([]string{"pod", "nginx-backend-0"}, "{.metadata.creationTimestamp}")
	if err != nil {
		t.Fatal(err)
	}
	// RFC 3339 in UTC orders as text.
	if createdAt < readyAt {
		t.Errorf("the new nginx-backend-0 was created at %s, before the new nginx-backend-1 was Ready (%s): the rollout did not wait for readiness", createdAt, readyAt)
	}
	uid0, err := ex.jsonpath([]string{"pod", "nginx-backend-0"}, "{.metadata.uid}")
	if err != nil || uid0 == uids["nginx-backend-0"] {
		t.Fatalf("nginx-backend-0 was not recreated for the new image (uid %s, %v)", uid0, err)
	}

	// A template whose Pods no node takes.
	ex.kubectl(t, "patch", "catsets", "nginx-backend", "--type=merge", "-p", `{"spec":{"template":{"spec":{"nodeSelector":{"composite.dev/no-such-node":"true"}}}}}`)
	ex.untilRolloutWaitsOn(t, cs, "nginx-backend-1", "Ready")
	if phase, _ := ex.jsonpath([]string{"pod", "nginx-backend-1"}, "{.status.phase}"); phase != "Pending" {
		t.Errorf("the new nginx-backend-1 is %q, want Pending (no node matches its nodeSelector)", phase)
	}
	if uid, err := ex.jsonpath([]string{"pod", "nginx-backend-0"}, "{.metadata.uid}"); err != nil || uid != uid0 {
		t.Errorf("nginx-backend-0 was recreated (uid %s, was %s; %v) while nginx-backend-1 never became Ready", uid, uid0, err)
	}

	// Reverted: the rollout goes on to the end.
	ex.kubectl(t, "patch", "catsets", "nginx-backend", "--type=json", "-p", `[{"op":"remove","path":"/spec/template/spec/nodeSelector"}]`)
	ex.until(t, cs, `{.status.conditions[?(@.type=="Updated")].reason}`, "OnLatestRevision")
	ex.until(t, cs, "{.status.readyReplicas}", "2")
}

func containsPrefix(words, prefix string) bool {
	for _, w := range strings.Fields(words) {
		if strings.HasPrefix(w, prefix) {
			return true
		}
	}
	return false
}
