package cluster

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/composite-apiserver/composite-apiserver/e2e/framework"
)

// TestManagedClusterValuesHoldOnTheLiveObjects installs the chart with
// ci/managed-values.yaml for real (as TestEveryInstallPathPassesPodSecurityRestricted
// does) and checks each managed-cluster option on what the cluster made of
// it: the critical-priority quota counts every Pod of the install (its scope
// matches their priority class, so that GKE admits them), the PVCs the
// StatefulSet controller created ask for the StorageClass of the values,
// each Pod's required anti-affinity selects its siblings and nothing else,
// etcd's NetworkPolicy selects the etcd Pods and lets in the server's Pods
// and the members only, and kube-prometheus's Prometheus may list the
// targets of the ServiceMonitor in the namespace (and not elsewhere).
func TestManagedClusterValuesHoldOnTheLiveObjects(t *testing.T) {
	t.Parallel()
	suite.SetUp(t)
	ctx := context.Background()
	installChartCRDs(t)
	modes, err := framework.ChartModes()
	if err != nil {
		t.Fatal(err)
	}
	ns := restrictedNamespace(t, "managed-cluster")
	rendered, err := framework.RenderChart(ns, modes["managed"])
	if err != nil {
		t.Fatal(err)
	}
	installRestricted(t, ns, ns, rendered)
	podList, err := suite.Kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pods := podList.Items
	byComponent := map[string][]string{}
	for _, p := range pods {
		byComponent[p.Labels["app.kubernetes.io/component"]] = append(byComponent[p.Labels["app.kubernetes.io/component"]], p.Name)
	}
	if len(byComponent["apiserver"]) != 2 || len(byComponent["etcd"]) != 3 {
		t.Fatalf("want 2 server and 3 etcd Pods, got %v", byComponent)
	}

	t.Run("critical-pods-quota", func(t *testing.T) {
		var used string
		// The quota controller recounts every 10 s (the stack's
		// --resource-quota-sync-period).
		err := wait.PollUntilContextTimeout(ctx, time.Second, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
			q, err := suite.Kube.CoreV1().ResourceQuotas(ns).Get(ctx, "gcp-critical-pods", metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			n := q.Status.Used[corev1.ResourcePods]
			used = n.String()
			return n.Value() == int64(len(pods)), nil
		})
		if err != nil {
			t.Errorf("quota gcp-critical-pods counts %s Pods, want all %d of the install: %v", used, len(pods), err)
		}
	})

	t.Run("storage-class", func(t *testing.T) {
		pvcs, err := suite.Kube.CoreV1().PersistentVolumeClaims(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if len(pvcs.Items) != 3 {
			t.Errorf("%d PVCs, want one per etcd member", len(pvcs.Items))
		}
		for _, pvc := range pvcs.Items {
			if got := pvc.Spec.StorageClassName; got == nil || *got != "premium-rwo" {
				t.Errorf("PVC %s has storageClassName %v, want premium-rwo", pvc.Name, got)
			}
		}
	})

	t.Run("hard-anti-affinity", func(t *testing.T) {
		for _, p := range pods {
			var terms []corev1.PodAffinityTerm
			if a := p.Spec.Affinity; a != nil && a.PodAntiAffinity != nil {
				terms = a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution
			}
			if len(terms) != 1 || terms[0].TopologyKey != "kubernetes.io/hostname" {
				t.Errorf("Pod %s: required anti-affinity %+v, want one term on kubernetes.io/hostname", p.Name, terms)
				continue
			}
			if got, want := selected(t, terms[0].LabelSelector, pods), byComponent[p.Labels["app.kubernetes.io/component"]]; !equalSorted(got, want) {
				t.Errorf("Pod %s keeps away from %v, want its siblings %v", p.Name, got, want)
			}
		}
	})

	t.Run("etcd-network-policy", func(t *testing.T) {
		np, err := suite.Kube.NetworkingV1().NetworkPolicies(ns).Get(ctx, "composite-apiserver-etcd", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		checkEtcdNetworkPolicy(t, np, pods, byComponent["apiserver"], byComponent["etcd"])
	})

	t.Run("prometheus-discovery", func(t *testing.T) {
		const prometheus = "system:serviceaccount:monitoring:prometheus-k8s"
		for _, res := range []authorizationv1.ResourceAttributes{
			{Resource: "endpoints"}, {Resource: "services"}, {Resource: "pods"},
			{Group: "discovery.k8s.io", Resource: "endpointslices"},
		} {
			for namespace, want := range map[string]bool{ns: true, "default": false} {
				res.Namespace, res.Verb = namespace, "list"
				if got := allowed(t, prometheus, res); got != want {
					t.Errorf("%s may list %s in %s: %v, want %v", prometheus, res.Resource, namespace, got, want)
				}
			}
		}
		for _, kind := range []string{"servicemonitors.monitoring.coreos.com", "prometheusrules.monitoring.coreos.com"} {
			if out := mustKubectl(t, "get", "-n", ns, kind, "-o", "name"); strings.TrimSpace(out) == "" {
				t.Errorf("no %s stored in %s", kind, ns)
			}
		}
	})
}

// checkEtcdNetworkPolicy: np applies to the etcd Pods, and lets in the
// server's Pods on the client port, the members on the client and peer
// ports, and nobody else anywhere.
func checkEtcdNetworkPolicy(t *testing.T, np *networkingv1.NetworkPolicy, pods []corev1.Pod, server, etcd []string) {
	t.Helper()
	if len(np.Spec.PolicyTypes) != 1 || np.Spec.PolicyTypes[0] != networkingv1.PolicyTypeIngress {
		t.Errorf("policy types %v, want Ingress", np.Spec.PolicyTypes)
	}
	if got := selected(t, &np.Spec.PodSelector, pods); !equalSorted(got, etcd) {
		t.Errorf("the policy applies to %v, want the etcd Pods %v", got, etcd)
	}
	// Who reaches which port: the union of the rules.
	reach := map[int32][]string{}
	for _, rule := range np.Spec.Ingress {
		var from []string
		for _, peer := range rule.From {
			if peer.IPBlock != nil || peer.NamespaceSelector != nil || peer.PodSelector == nil {
				t.Errorf("a rule admits %+v: want Pods of the namespace only", peer)
				continue
			}
			from = append(from, selected(t, peer.PodSelector, pods)...)
		}
		if len(rule.Ports) == 0 {
			t.Errorf("a rule opens every port to %v", from)
		}
		for _, port := range rule.Ports {
			reach[port.Port.IntVal] = append(reach[port.Port.IntVal], from...)
		}
	}
	want := map[int32][]string{2379: append(append([]string{}, server...), etcd...), 2380: etcd}
	for port, w := range want {
		if !equalSorted(reach[port], w) {
			t.Errorf("port %d is reached from %v, want %v", port, reach[port], w)
		}
	}
	if len(reach) != len(want) {
		t.Errorf("the policy opens ports %v, want 2379 and 2380 only", keysOfReach(reach))
	}
}

// selected are the names of the pods sel matches.
func selected(t *testing.T, sel *metav1.LabelSelector, pods []corev1.Pod) []string {
	t.Helper()
	s, err := metav1.LabelSelectorAsSelector(sel)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, p := range pods {
		if s.Matches(labels.Set(p.Labels)) {
			out = append(out, p.Name)
		}
	}
	return out
}

func equalSorted(a, b []string) bool {
	a, b = append([]string{}, a...), append([]string{}, b...)
	sort.Strings(a)
	sort.Strings(b)
	return fmt.Sprint(a) == fmt.Sprint(b)
}

func keysOfReach(m map[int32][]string) []int32 {
	var out []int32
	for k := range m {
		out = append(out, k)
	}
	return out
}

// allowed asks kube-apiserver's authorizer whether user may do res.
func allowed(t *testing.T, user string, res authorizationv1.ResourceAttributes) bool {
	t.Helper()
	sar, err := suite.Kube.AuthorizationV1().SubjectAccessReviews().Create(context.Background(), &authorizationv1.SubjectAccessReview{
		Spec: authorizationv1.SubjectAccessReviewSpec{User: user, Groups: []string{"system:serviceaccounts", "system:serviceaccounts:monitoring", "system:authenticated"}, ResourceAttributes: &res},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return sar.Status.Allowed
}
