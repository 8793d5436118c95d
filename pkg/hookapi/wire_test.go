package hookapi

import (
	"encoding/json"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/composite-apiserver/composite-apiserver/apis/metacontroller/v1alpha1"
)

func obj(apiVersion, kind, namespace, name string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion(apiVersion)
	u.SetKind(kind)
	u.SetNamespace(namespace)
	u.SetName(name)
	return u
}

func exampleController() *v1alpha1.CompositeController {
	v := v1alpha1.HookVersionV1
	url := "http://hook.example/sync"
	return &v1alpha1.CompositeController{
		TypeMeta:   metav1.TypeMeta{APIVersion: "metacontroller.k8s.io/v1alpha1", Kind: "CompositeController"},
		ObjectMeta: metav1.ObjectMeta{Name: "things"},
		Spec: v1alpha1.CompositeControllerSpec{
			ParentResource: v1alpha1.CompositeControllerParentResourceRule{
				ResourceRule: v1alpha1.ResourceRule{APIVersion: "example.com/v1", Resource: "things"},
			},
			ChildResources: []v1alpha1.CompositeControllerChildResourceRule{{
				ResourceRule: v1alpha1.ResourceRule{APIVersion: "v1", Resource: "pods"},
			}},
			Hooks: &v1alpha1.CompositeControllerHooks{
				Sync: &v1alpha1.Hook{Version: &v, Webhook: &v1alpha1.Webhook{URL: &url}},
			},
		},
	}
}

func TestSyncHookRequestJSONIsMetacontrollers(t *testing.T) {
	parent := obj("example.com/v1", "Thing", "ns", "t1")
	children := RelativeObjectMap{}
	children.InitGroup("apps/v1", "Deployment")
	children.Insert(v1alpha1.HookVersionV1, obj("v1", "Pod", "ns", "t1-a"))
	req := &SyncHookRequest{
		Controller: exampleController(),
		Parent:     parent,
		Children:   children,
	}
	got, err := json.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"controller":{"kind":"CompositeController","apiVersion":"metacontroller.k8s.io/v1alpha1","metadata":{"name":"things"},` +
		`"spec":{"parentResource":{"apiVersion":"example.com/v1","resource":"things"},"childResources":[{"apiVersion":"v1","resource":"pods"}],` +
		`"hooks":{"sync":{"version":"v1","webhook":{"url":"http://hook.example/sync"}}}},"status":{}},` +
		`"parent":{"apiVersion":"example.com/v1","kind":"Thing","metadata":{"name":"t1","namespace":"ns"}},` +
		`"children":{"Deployment.apps/v1":{},"Pod.v1":{"t1-a":{"apiVersion":"v1","kind":"Pod","metadata":{"name":"t1-a","namespace":"ns"}}}},` +
		`"related":{},"finalizing":false}`
	if string(got) != want {
		t.Errorf("request JSON differs\n got: %s\nwant: %s", got, want)
	}

	// The JSON decodes back into the same request.
	var back SyncHookRequest
	if err := json.Unmarshal(got, &back); err != nil {
		t.Fatal(err)
	}
	if back.Children["Pod.v1"]["t1-a"].GetName() != "t1-a" || back.Parent.GetName() != "t1" || back.Controller.Name != "things" {
		t.Errorf("round trip lost data: %+v", back)
	}
}

func TestSyncHookResponseJSONIsMetacontrollers(t *testing.T) {
	resp := &SyncHookResponse{
		Status:             map[string]interface{}{"replicas": int64(2)},
		Children:           []*unstructured.Unstructured{obj("v1", "Pod", "", "t1-a")},
		ResyncAfterSeconds: 1.5,
	}
	got, err := json.Marshal(resp)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"status":{"replicas":2},"children":[{"apiVersion":"v1","kind":"Pod","metadata":{"name":"t1-a"}}],"resyncAfterSeconds":1.5,"finalized":false}`
	if string(got) != want {
		t.Errorf("response JSON differs\n got: %s\nwant: %s", got, want)
	}

	empty, err := json.Marshal(&SyncHookResponse{Finalized: true})
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"status":null,"children":null,"resyncAfterSeconds":0,"finalized":true}`; string(empty) != want {
		t.Errorf("empty response JSON differs\n got: %s\nwant: %s", empty, want)
	}
}

func TestCustomizeJSONIsMetacontrollers(t *testing.T) {
	req, err := json.Marshal(&CustomizeHookRequest{Parent: obj("example.com/v1", "Thing", "ns", "t1")})
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"controller":null,"parent":{"apiVersion":"example.com/v1","kind":"Thing","metadata":{"name":"t1","namespace":"ns"}}}`; string(req) != want {
		t.Errorf("customize request JSON differs\n got: %s\nwant: %s", req, want)
	}

	resp, err := json.Marshal(&CustomizeHookResponse{RelatedResourceRules: []*RelatedResourceRule{
		{APIVersion: "v1", Resource: "configmaps", LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "x"}}},
		{APIVersion: "v1", Resource: "secrets", Namespace: "ns", Names: []string{"a", "b"}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	want := `{"relatedResources":[` +
		`{"apiVersion":"v1","resource":"configmaps","labelSelector":{"matchLabels":{"app":"x"}},"names":null},` +
		`{"apiVersion":"v1","resource":"secrets","labelSelector":null,"namespace":"ns","names":["a","b"]}]}`
	if string(resp) != want {
		t.Errorf("customize response JSON differs\n got: %s\nwant: %s", resp, want)
	}

	none, err := json.Marshal(&CustomizeHookResponse{})
	if err != nil {
		t.Fatal(err)
	}
	if string(none) != `{}` {
		t.Errorf("empty customize response: got %s, want {}", none)
	}
}

func TestGenerateJSON(t *testing.T) {
	ref := ObjectRef{APIVersion: "v1", Kind: "ConfigMap", Namespace: "ns", Name: "t1-a"}
	req := &GenerateRequest{
		Variables: Variables{Builtin: BuiltinVariables{
			Controller: &ControllerVariables{Name: "things", Generation: 2},
			Parent: &ParentVariables{APIVersion: "example.com/v1", Kind: "Thing",
				Metadata: ParentMetadata{Name: "t1", Namespace: "ns", Labels: map[string]string{}, Annotations: map[string]string{}},
				Spec:     map[string]interface{}{"replicas": int64(3)}},
		}},
		Items: []*GenerateRequestItem{{UID: "u1", Ref: ref, Variables: Variables{Builtin: BuiltinVariables{Child: &ref}}, Object: obj("v1", "ConfigMap", "ns", "t1-a")}},
	}
	got, err := json.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"variables":{"builtin":{"controller":{"name":"things","generation":2},"parent":{"apiVersion":"example.com/v1","kind":"Thing",` +
		`"metadata":{"name":"t1","namespace":"ns","labels":{},"annotations":{}},"spec":{"replicas":3}}}},` +
		`"items":[{"uid":"u1","ref":{"apiVersion":"v1","kind":"ConfigMap","namespace":"ns","name":"t1-a"},` +
		`"variables":{"builtin":{"child":{"apiVersion":"v1","kind":"ConfigMap","namespace":"ns","name":"t1-a"}}},` +
		`"object":{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"t1-a","namespace":"ns"}}}]}`
	if string(got) != want {
		t.Errorf("request JSON differs\n got: %s\nwant: %s", got, want)
	}

	resp := &GenerateResponse{Items: []GenerateResponseItem{
		{UID: "u1", PatchType: PatchTypeJSONMergePatch, Patch: []byte(`{"data":{"a":"b"}}`)},
	}}
	got, err = json.Marshal(resp)
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"items":[{"uid":"u1","patchType":"JSONMergePatch","patch":{"data":{"a":"b"}}}]}`; string(got) != want {
		t.Errorf("response JSON differs\n got: %s\nwant: %s", got, want)
	}
}
