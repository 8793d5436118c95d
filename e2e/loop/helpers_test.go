package loop

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
)

// events returns the reasons and messages of the Events about an object.
func events(t *testing.T, ns, name string) []string {
	t.Helper()
	list, err := suite.Kube.CoreV1().Events(ns).List(context.Background(), metav1.ListOptions{FieldSelector: "involvedObject.name=" + name})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range list.Items {
		out = append(out, e.Type+" "+e.Reason+": "+e.Message)
	}
	return out
}

func waitEvent(t *testing.T, ns, name, substring string) {
	t.Helper()
	suite.Eventually(t, "an Event on "+name+" containing "+substring, func() (bool, error) {
		for _, e := range events(t, ns, name) {
			if strings.Contains(e, substring) {
				return true, nil
			}
		}
		return false, nil
	})
}

// ccUID is the UID of the CompositeController name.
func ccUID(t *testing.T, name string) types.UID {
	t.Helper()
	got, err := suite.Client.MetacontrollerV1alpha1().CompositeControllers().Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return got.UID
}

// eventsOf counts the Events of reason, on the object of uid in namespace
// ns, whose message contains substring.
func eventsOf(t *testing.T, ns string, uid types.UID, reason, substring string) int32 {
	t.Helper()
	return countEvents(t, ns, "involvedObject.uid="+string(uid)+",reason="+reason, substring)
}

// countEvents counts the Events in namespace ns, of fieldSelector, whose
// message contains substring: by their count, for the recorder folds
// repeats of one Event into one object.
func countEvents(t *testing.T, ns, fieldSelector, substring string) int32 {
	t.Helper()
	list, err := suite.Kube.CoreV1().Events(ns).List(context.Background(), metav1.ListOptions{FieldSelector: fieldSelector})
	if err != nil {
		t.Fatal(err)
	}
	var n int32
	for _, e := range list.Items {
		if strings.Contains(e.Message, substring) {
			n += max(e.Count, 1)
		}
	}
	return n
}

// waitControllerEvent waits for an Event of reason whose message contains
// substring on the controller of uid, a cluster-scoped object whose Events
// are in the default namespace: by its UID, for a controller of the same
// name in a former run of the test (go test -count) left its Events there.
func waitControllerEvent(t *testing.T, uid types.UID, reason, substring string) {
	t.Helper()
	suite.Eventually(t, "a "+reason+" Event on controller "+string(uid)+" containing "+substring, func() (bool, error) {
		return eventsOf(t, metav1.NamespaceDefault, uid, reason, substring) > 0, nil
	})
}

// refuse installs a ValidatingAdmissionPolicy, named after ns, that refuses
// operation on resource of group in namespace ns with message, and returns
// what lifts it (also run when t ends). kube-apiserver enforces it on its
// own resources, composite-apiserver on ours.
func refuse(t *testing.T, ns, group, resource, operation, message string) (lift func()) {
	t.Helper()
	ctx := context.Background()
	policy := fmt.Sprintf(`apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata:
  name: %[1]s
spec:
  failurePolicy: Fail
  matchConstraints:
    resourceRules:
    - apiGroups: [%[2]q]
      apiVersions: ["*"]
      operations: [%[4]s]
      resources: [%[3]s]
  validations:
  - expression: "false"
    message: %[5]q
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata:
  name: %[1]s
spec:
  policyName: %[1]s
  validationActions: [Deny]
  matchResources:
    namespaceSelector:
      matchLabels: {kubernetes.io/metadata.name: %[1]s}
`, ns, group, resource, operation, message)
	suite.MustApply(t, policy)
	lift = func() {
		_ = suite.Kube.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings().Delete(ctx, ns, metav1.DeleteOptions{})
		_ = suite.Kube.AdmissionregistrationV1().ValidatingAdmissionPolicies().Delete(ctx, ns, metav1.DeleteOptions{})
	}
	t.Cleanup(lift)
	return lift
}

// record is what goroutines (watches, hooks) append to while a test reads
// it, in order.
type record[T any] struct {
	mu    sync.Mutex
	items []T
}

func (r *record[T]) add(item T) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.items = append(r.items, item)
}

// get is a copy of what was added so far, which later adds leave as it is.
func (r *record[T]) get() []T {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]T(nil), r.items...)
}

// nudgeUntil calls nudge with i = 1, 2, … every two seconds until done,
// failing t after timeout or when the stack went down. A nudge is a fresh
// sync of a parent, whatever its backoff: a right granted or revoked a
// moment ago shows only once the delegating authorizer's cache of the
// last answer expires (seconds).
func nudgeUntil(t *testing.T, what string, timeout time.Duration, done func() bool, nudge func(ctx context.Context, i int)) {
	t.Helper()
	i := 0
	err := wait.PollUntilContextTimeout(context.Background(), 2*time.Second, timeout, true, func(ctx context.Context) (bool, error) {
		if down := suite.Down(); down != nil {
			return false, down
		}
		if done() {
			return true, nil
		}
		i++
		nudge(ctx, i)
		return false, nil
	})
	if err != nil {
		t.Fatalf("waiting for %s: %v", what, err)
	}
}
