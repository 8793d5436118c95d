package reconcile_test

import (
	"context"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	metadatafake "k8s.io/client-go/metadata/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"

	"github.com/composite-apiserver/composite-apiserver/apis/metacontroller/v1alpha1"
	"github.com/composite-apiserver/composite-apiserver/internal/definition"
	"github.com/composite-apiserver/composite-apiserver/internal/engine"
	"github.com/composite-apiserver/composite-apiserver/internal/reconcile"
	"github.com/composite-apiserver/composite-apiserver/pkg/hookapi"
)

var (
	hellos     = schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "hellos"}
	configMaps = schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
)

// One whole sync of one parent, as the loop runs it on every change and a
// live /sync runs it on request: the hook is called, its plan carried out
// (children applied and deleted) and the parent's status written. The
// cluster here is client-go's fakes: a Hello whose hook now wants the
// ConfigMap world, and the ConfigMap world-old it made before.
func ExampleController_Sync() {
	cc := &v1alpha1.CompositeController{
		ObjectMeta: metav1.ObjectMeta{Name: "hello"},
		Spec: v1alpha1.CompositeControllerSpec{
			// Children carry the label controller-uid=<parent's uid>.
			GenerateSelector: ptr.To(true),
			ParentResource:   v1alpha1.CompositeControllerParentResourceRule{ResourceRule: v1alpha1.ResourceRule{APIVersion: "example.com/v1", Resource: "hellos"}},
			ChildResources:   []v1alpha1.CompositeControllerChildResourceRule{{ResourceRule: v1alpha1.ResourceRule{APIVersion: "v1", Resource: "configmaps"}}},
			Hooks:            &v1alpha1.CompositeControllerHooks{Sync: &v1alpha1.Hook{}},
		},
	}
	def, err := definition.Compile(cc, definition.GuessingResolver())
	if err != nil {
		panic(err)
	}
	hook := hookapi.SyncHookFunc(func(ctx context.Context, req *hookapi.SyncHookRequest) (*hookapi.SyncHookResponse, error) {
		child := &unstructured.Unstructured{}
		child.SetAPIVersion("v1")
		child.SetKind("ConfigMap")
		child.SetName(req.Parent.GetName())
		return &hookapi.SyncHookResponse{Status: map[string]interface{}{"configMaps": int64(1)}, Children: []*unstructured.Unstructured{child}}, nil
	})
	controller := &reconcile.Controller{Def: def, Hooks: engine.Hooks{Sync: engine.InProcess(hook)}}

	parent := &unstructured.Unstructured{Object: map[string]interface{}{
		"apiVersion": "example.com/v1", "kind": "Hello",
		"metadata": map[string]interface{}{"name": "world", "namespace": "default", "uid": "1", "generation": int64(3)},
	}}
	old := &unstructured.Unstructured{Object: map[string]interface{}{
		"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]interface{}{
			"name": "world-old", "namespace": "default", "uid": "2",
			"labels": map[string]interface{}{engine.ControllerUIDLabel: "1"},
		},
	}}
	old.SetOwnerReferences([]metav1.OwnerReference{engine.ControllerRef(parent)})
	client := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[schema.GroupVersionResource]string{hellos: "HelloList", configMaps: "ConfigMapList"}, parent.DeepCopy(), old)
	// Children are server-side applied through the metadata client, which
	// client-go's fake does not do: answer as kube-apiserver would, with
	// the stored object's metadata.
	scheme := runtime.NewScheme()
	_ = metav1.AddMetaToScheme(scheme)
	applies := metadatafake.NewSimpleMetadataClient(scheme)
	applies.PrependReactor("patch", "configmaps", func(a k8stesting.Action) (bool, runtime.Object, error) {
		return true, &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: a.(k8stesting.PatchAction).GetName(), UID: "3", ResourceVersion: "1"}}, nil
	})

	res, err := controller.Sync(context.Background(), reconcile.Env{
		Client:   client,
		Metadata: applies,
		Resolver: definition.GuessingResolver(),
		Children: clusterLister{client},
	}, parent, reconcile.Options{})
	if err != nil {
		panic(err)
	}
	// Done is in the plan's order, which is sorted.
	for _, done := range res.Done {
		fmt.Println(done, done.Err)
	}
	stored, err := client.Resource(hellos).Namespace("default").Get(context.Background(), "world", metav1.GetOptions{})
	if err != nil {
		panic(err)
	}
	fmt.Println("status written:", res.StatusWritten, stored.Object["status"])
	// Output:
	// Create ConfigMap default/world <nil>
	// Delete ConfigMap default/world-old <nil>
	// status written: true map[configMaps:1 observedGeneration:3]
}

// clusterLister lists the candidate children straight from the cluster;
// the loop lists them from its informers' caches instead.
type clusterLister struct{ client dynamic.Interface }

func (l clusterLister) List(ctx context.Context, gvr schema.GroupVersionResource, namespace string, selector labels.Selector) ([]*unstructured.Unstructured, error) {
	list, err := l.client.Resource(gvr).Namespace(namespace).List(ctx, metav1.ListOptions{LabelSelector: selector.String()})
	if err != nil {
		return nil, err
	}
	out := make([]*unstructured.Unstructured, len(list.Items))
	for i := range list.Items {
		out[i] = &list.Items[i]
	}
	return out, nil
}

// Namespaces is asked only by a customize hook's rules; this controller has
// none.
func (l clusterLister) Namespaces(ctx context.Context, selector labels.Selector) ([]string, error) {
	return nil, nil
}
