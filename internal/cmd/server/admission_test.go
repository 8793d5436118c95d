package server

import (
	"errors"
	"maps"
	"slices"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	fakediscovery "k8s.io/client-go/discovery/fake"
	clienttesting "k8s.io/client-go/testing"
)

func TestAdmissionPluginsWithoutTheirAPIsAreFound(t *testing.T) {
	admissionV1 := func(resources ...string) *metav1.APIResourceList {
		l := &metav1.APIResourceList{GroupVersion: "admissionregistration.k8s.io/v1"}
		for _, r := range resources {
			l.APIResources = append(l.APIResources, metav1.APIResource{Name: r})
		}
		return l
	}
	webhooks := []string{"mutatingwebhookconfigurations", "validatingwebhookconfigurations"}
	vap := []string{"validatingadmissionpolicies", "validatingadmissionpolicybindings"}
	mapV1 := []string{"mutatingadmissionpolicies", "mutatingadmissionpolicybindings"}
	for _, tc := range []struct {
		name      string
		resources []*metav1.APIResourceList
		want      []string
	}{
		{"1.36 and later serve every plugin's API", []*metav1.APIResourceList{admissionV1(slices.Concat(webhooks, vap, mapV1)...)}, nil},
		{"1.30 to 1.35 lack MutatingAdmissionPolicy's v1", []*metav1.APIResourceList{admissionV1(slices.Concat(webhooks, vap)...)}, []string{"MutatingAdmissionPolicy"}},
		{"a policy without its bindings is not enough", []*metav1.APIResourceList{admissionV1(slices.Concat(webhooks, vap, mapV1[:1])...)}, []string{"MutatingAdmissionPolicy"}},
		{"before 1.30 neither policy plugin", []*metav1.APIResourceList{admissionV1(webhooks...)}, []string{"MutatingAdmissionPolicy", "ValidatingAdmissionPolicy"}},
		{"no admissionregistration.k8s.io/v1 at all", nil,
			[]string{"MutatingAdmissionPolicy", "MutatingAdmissionWebhook", "ValidatingAdmissionPolicy", "ValidatingAdmissionWebhook"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			client := &fakediscovery.FakeDiscovery{Fake: &clienttesting.Fake{Resources: tc.resources}}
			missing, err := pluginsWithoutAPIs(client, admissionPluginAPIs)
			if err != nil {
				t.Fatal(err)
			}
			if got := slices.Sorted(maps.Keys(missing)); !slices.Equal(got, tc.want) {
				t.Errorf("plugins without their APIs: %v, want %v (%v)", got, tc.want, missing)
			}
		})
	}
}

func TestAdmissionDiscoveryErrorsAreNotTakenForMissingAPIs(t *testing.T) {
	fake := &clienttesting.Fake{}
	fake.AddReactor("get", "resource", func(clienttesting.Action) (bool, runtime.Object, error) {
		return true, nil, errors.New("connection refused")
	})
	if _, err := pluginsWithoutAPIs(&fakediscovery.FakeDiscovery{Fake: fake}, admissionPluginAPIs); err == nil {
		t.Fatal("a cluster that can't be asked was taken for one without the admission APIs")
	}
}
