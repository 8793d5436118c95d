package framework

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
)

// Within polls cond every 100 ms for up to timeout, and fails t when it
// never holds. An error of cond is kept as the last one and polling goes
// on; it gives up at once when the stack is down (composite-apiserver or
// the control plane ended without being asked to), since nothing it waits
// for can happen then.
func (s *Stack) Within(t testing.TB, what string, timeout time.Duration, cond func() (bool, error)) {
	t.Helper()
	var lastErr error
	err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
		if down := s.Down(); down != nil {
			return false, down
		}
		ok, err := cond()
		if err != nil {
			lastErr = err
			return false, nil
		}
		return ok, nil
	})
	if down := s.Down(); down != nil {
		t.Fatalf("waiting for %s: the stack is down: %v", what, down)
	}
	if err != nil {
		t.Fatalf("timed out waiting for %s (last error: %v)", what, lastErr)
	}
}

// WaitForEvent waits up to timeout for an Event of reason on the object
// ns/name whose message contains substring: a test waits for the Event of
// its own case, not for a state an earlier case may have left.
func (s *Stack) WaitForEvent(t testing.TB, ns, name, reason, substring string, timeout time.Duration) {
	t.Helper()
	s.Within(t, "a "+reason+" Event on "+name+" containing "+substring, timeout, func() (bool, error) {
		list, err := s.Kube.CoreV1().Events(ns).List(context.Background(), metav1.ListOptions{FieldSelector: "involvedObject.name=" + name + ",reason=" + reason})
		if err != nil {
			return false, err
		}
		for _, e := range list.Items {
			if strings.Contains(e.Message, substring) {
				return true, nil
			}
		}
		return false, nil
	})
}

// Grant gives subject (one RBAC subject, in YAML flow style) the rules
// (a YAML "rules:" block) in namespace ns as a Role and RoleBinding named
// name, or cluster-wide as a ClusterRole and ClusterRoleBinding when ns is
// empty, until t ends.
func (s *Stack) Grant(t testing.TB, name, ns, rules, subject string) {
	t.Helper()
	kind, bindingKind, where := "ClusterRole", "ClusterRoleBinding", ""
	if ns != "" {
		kind, bindingKind, where = "Role", "RoleBinding", "\n  namespace: "+ns
	}
	manifest := fmt.Sprintf(`apiVersion: rbac.authorization.k8s.io/v1
kind: %[1]s
metadata:
  name: %[3]s%[4]s
%[5]s---
apiVersion: rbac.authorization.k8s.io/v1
kind: %[2]s
metadata:
  name: %[3]s%[4]s
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: %[1]s
  name: %[3]s
subjects:
- %[6]s
`, kind, bindingKind, name, where, rules, subject)
	if err := s.Apply(context.Background(), manifest); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		args := []string{"delete", strings.ToLower(bindingKind) + "," + strings.ToLower(kind), name, "--ignore-not-found"}
		if ns != "" {
			args = append(args, "-n", ns)
		}
		_, _, _ = s.Kubectl(context.Background(), args...)
	})
}
