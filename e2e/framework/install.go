package framework

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/yaml"
)

// Install is what InstallNamespaced applied.
type Install struct {
	// Pods is how many Pods the Deployments and StatefulSets applied ask
	// for.
	Pods int
	// Warnings are the warnings kube-apiserver gave the apply (PodSecurity
	// warns about a workload's pod template), as kubectl printed them.
	Warnings []string
}

// InstallNamespaced applies, for real and server-side as the
// administrator, the objects of rendered (a chart's or a kustomization's
// manifests) that belong to namespace from, into namespace ns. The others
// (cluster-scoped, kube-system's) are left out: they would replace the
// stack's own (its RBAC and APIService are artifacts/deploy's). The
// stack's kube-controller-manager then makes the Pods of the Deployments
// and StatefulSets, and kube-apiserver admits or refuses each, as on a
// cluster with nodes (here they stay Pending). ns needs a default
// ServiceAccount for Pods that name none (EnsureDefaultServiceAccount).
func (s *Stack) InstallNamespaced(ctx context.Context, rendered, from, ns string) (*Install, error) {
	objs, err := SplitManifests(rendered)
	if err != nil {
		return nil, err
	}
	var docs []string
	in := &Install{}
	workloads := 0
	for _, o := range objs {
		if o.Namespace != from {
			continue
		}
		var obj map[string]interface{}
		if err := yaml.Unmarshal([]byte(o.YAML), &obj); err != nil {
			return nil, err
		}
		obj["metadata"].(map[string]interface{})["namespace"] = ns
		doc, err := yaml.Marshal(obj)
		if err != nil {
			return nil, err
		}
		docs = append(docs, string(doc))
		if o.Kind == "Deployment" || o.Kind == "StatefulSet" {
			var w struct {
				Spec struct{ Replicas *int } `json:"spec"`
			}
			if err := yaml.Unmarshal([]byte(o.YAML), &w); err != nil {
				return nil, err
			}
			n := 1 // the API's default
			if w.Spec.Replicas != nil {
				n = *w.Spec.Replicas
			}
			in.Pods += n
			workloads++
		}
	}
	if workloads == 0 {
		return nil, fmt.Errorf("no Deployment or StatefulSet in namespace %s among the %d rendered objects", from, len(objs))
	}
	file := filepath.Join(s.Dir, "install-"+sanitize(ns)+".yaml")
	if err := os.WriteFile(file, []byte(strings.Join(docs, "\n---\n")), 0o644); err != nil {
		return nil, err
	}
	_, stderr, err := s.Kubectl(ctx, "apply", "--server-side", "--field-manager=e2e-install", "-f", file)
	if err != nil {
		return nil, fmt.Errorf("kubectl apply --server-side -f %s: %w\n%s", file, err, stderr)
	}
	for _, line := range strings.Split(stderr, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "Warning:") {
			in.Warnings = append(in.Warnings, strings.TrimSpace(line))
		}
	}
	return in, nil
}

// EnsureDefaultServiceAccount creates ns's default ServiceAccount: the
// serviceaccount controller's part, which the stack does not run. A Pod
// that names no ServiceAccount is admitted only when it exists.
func (s *Stack) EnsureDefaultServiceAccount(ctx context.Context, ns string) error {
	_, err := s.Kube.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	return nil
}

// WaitPods waits until namespace ns holds want Pods and returns their
// names; when they never come, the error has the namespace's Events (the
// controllers' FailedCreate, with admission's reason).
func (s *Stack) WaitPods(ctx context.Context, ns string, want int) ([]string, error) {
	var got []string
	err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
		list, err := s.Kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, nil
		}
		got = got[:0]
		for _, p := range list.Items {
			got = append(got, p.Name)
		}
		return len(got) >= want, nil
	})
	if err != nil {
		return got, fmt.Errorf("%d of %d Pods admitted in %s (%v): %w\nEvents:\n%s", len(got), want, ns, got, err, s.NamespaceEvents(ctx, ns))
	}
	return got, nil
}

// NamespaceEvents lists the Events of namespace ns, one a line.
func (s *Stack) NamespaceEvents(ctx context.Context, ns string) string {
	list, err := s.Kube.CoreV1().Events(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return err.Error()
	}
	var b strings.Builder
	for _, e := range list.Items {
		fmt.Fprintf(&b, "  %s %s/%s %s: %s\n", e.Type, e.InvolvedObject.Kind, e.InvolvedObject.Name, e.Reason, e.Message)
	}
	return b.String()
}
