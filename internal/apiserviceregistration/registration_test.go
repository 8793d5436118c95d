package apiserviceregistration

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	kubefake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/util/cert"
	apiregistrationv1 "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"
	aggregator "k8s.io/kube-aggregator/pkg/client/clientset_generated/clientset"
	aggregatorfake "k8s.io/kube-aggregator/pkg/client/clientset_generated/clientset/fake"
)

func testConfig(caFile string) Config {
	return Config{
		Name: "v1alpha1.metacontroller.k8s.io", Group: "metacontroller.k8s.io", Version: "v1alpha1",
		GroupPriorityMinimum: 1000, VersionPriority: 15,
		ServiceNamespace: "composite-system", ServiceName: "composite-apiserver", ServicePort: 443,
		CAFile: caFile, OwnerClusterRoleBinding: "composite-apiserver",
	}
}

// newCA returns the PEM of a new self-signed certificate and its CA: the
// content of a CA bundle.
func newCA(t *testing.T, name string) []byte {
	t.Helper()
	certPEM, _, err := cert.GenerateSelfSignedCertKey(name, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	return certPEM
}

// waitCABundle waits until the APIService's caBundle is want.
func waitCABundle(t *testing.T, client aggregator.Interface, want []byte) *apiregistrationv1.APIService {
	t.Helper()
	var last *apiregistrationv1.APIService
	err := wait.PollUntilContextTimeout(context.Background(), 10*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		a, err := client.ApiregistrationV1().APIServices().Get(ctx, "v1alpha1.metacontroller.k8s.io", metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		last = a
		return bytes.Equal(a.Spec.CABundle, want), nil
	})
	if err != nil {
		t.Fatalf("the APIService never carried the CA of the file (last: %+v): %v", last, err)
	}
	return last
}

// TestTheAPIServiceFollowsTheCAFile: the APIService is applied with the
// file's CA, owned by the ClusterRoleBinding, and applied again with the
// new CA when the file changes (a CA rotation, as the kubelet writes a
// Secret's new data: a new file renamed over the old one).
func TestTheAPIServiceFollowsTheCAFile(t *testing.T) {
	dir := t.TempDir()
	caFile := filepath.Join(dir, "ca.crt")
	first := newCA(t, "first")
	if err := os.WriteFile(caFile, first, 0o600); err != nil {
		t.Fatal(err)
	}
	client := aggregatorfake.NewClientset()
	kube := kubefake.NewClientset(&rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "composite-apiserver", UID: types.UID("binding-uid")}})
	r, err := New(testConfig(caFile), client, kube)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go r.Run(ctx)

	a := waitCABundle(t, client, first)
	if s := a.Spec.Service; s == nil || s.Namespace != "composite-system" || s.Name != "composite-apiserver" || s.Port == nil || *s.Port != 443 {
		t.Errorf("service: %+v", a.Spec.Service)
	}
	if a.Spec.Group != "metacontroller.k8s.io" || a.Spec.Version != "v1alpha1" || a.Spec.GroupPriorityMinimum != 1000 || a.Spec.VersionPriority != 15 {
		t.Errorf("spec: %+v", a.Spec)
	}
	if refs := a.OwnerReferences; len(refs) != 1 || refs[0].Kind != "ClusterRoleBinding" || refs[0].Name != "composite-apiserver" || refs[0].UID != "binding-uid" {
		t.Errorf("owner references: %+v", refs)
	}

	second := newCA(t, "second")
	tmp := filepath.Join(dir, "ca.crt.new")
	if err := os.WriteFile(tmp, second, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, caFile); err != nil {
		t.Fatal(err)
	}
	waitCABundle(t, client, second)
}

// TestRegistrationWaitsForWhatMustComeFirst: the APIService is not written
// while kube-apiserver's own (Metacontroller's CRDs) holds the name, nor
// when the owner is gone (an uninstall under way); an unreadable CA file
// stops the server at start.
func TestRegistrationWaitsForWhatMustComeFirst(t *testing.T) {
	caFile := filepath.Join(t.TempDir(), "ca.crt")
	if err := os.WriteFile(caFile, newCA(t, "ca"), 0o600); err != nil {
		t.Fatal(err)
	}
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "composite-apiserver"}}
	local := &apiregistrationv1.APIService{
		ObjectMeta: metav1.ObjectMeta{Name: "v1alpha1.metacontroller.k8s.io"},
		Spec:       apiregistrationv1.APIServiceSpec{Group: "metacontroller.k8s.io", Version: "v1alpha1"},
	}
	for _, tc := range []struct {
		name       string
		aggregator *aggregatorfake.Clientset
		kube       *kubefake.Clientset
		want       string
	}{
		{"Metacontroller's APIService", aggregatorfake.NewClientset(local), kubefake.NewClientset(binding), "kube-apiserver's own"},
		{"owner gone", aggregatorfake.NewClientset(), kubefake.NewClientset(), "the APIService's owner"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := New(testConfig(caFile), tc.aggregator, tc.kube)
			if err != nil {
				t.Fatal(err)
			}
			err = r.apply(context.Background())
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("apply: %v, want an error saying %q", err, tc.want)
			}
			a, _ := tc.aggregator.ApiregistrationV1().APIServices().Get(context.Background(), "v1alpha1.metacontroller.k8s.io", metav1.GetOptions{})
			if a != nil && a.Spec.Service != nil {
				t.Errorf("the APIService was written: %+v", a.Spec)
			}
		})
	}
	if _, err := New(testConfig(filepath.Join(t.TempDir(), "missing")), aggregatorfake.NewClientset(), kubefake.NewClientset()); err == nil {
		t.Error("a missing CA file was accepted")
	}
}
