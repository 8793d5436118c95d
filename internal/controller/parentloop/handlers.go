package parentloop

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/tools/cache"

	"github.com/composite-apiserver/composite-apiserver/internal/controller/expectations"
)

// enqueueParent queues a parent the controller syncs
// (selectedOrFinalizing).
func (pc *parentLoop) enqueueParent(obj interface{}) {
	key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj)
	if err != nil {
		utilruntime.HandleError(err)
		return
	}
	if u, ok := obj.(*unstructured.Unstructured); ok && !selectedOrFinalizing(pc.rec.Def, u) {
		return
	}
	pc.enqueue(key)
}

func (pc *parentLoop) updateParent(old, cur interface{}) {
	c, ok := cur.(*unstructured.Unstructured)
	if !ok {
		pc.enqueueParent(cur)
		return
	}
	wanted := pc.wanted(old.(*unstructured.Unstructured), c)
	key, err := cache.MetaNamespaceKeyFunc(c)
	if err != nil {
		utilruntime.HandleError(err)
		return
	}
	if pc.expectations.ParentObserved(key, c.GetResourceVersion(), wanted) {
		pc.enqueueParent(cur)
	}
}

func (pc *parentLoop) deleteParent(obj interface{}) {
	if tombstone, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tombstone.Obj
	}
	if u, ok := obj.(*unstructured.Unstructured); ok && pc.customize != nil {
		pc.customize.forget(u.GetUID())
	}
	if key, err := cache.MetaNamespaceKeyFunc(obj); err == nil {
		pc.expectations.Forget(key)
	}
	pc.enqueueParent(obj)
}

func (pc *parentLoop) enqueueAll() {
	pc.enqueueWhere(func(string) bool { return true })
}

// enqueueWhere queues the parents whose key is in: those of shards this
// replica gained.
func (pc *parentLoop) enqueueWhere(in func(key string) bool) {
	if pc.parents == nil {
		return
	}
	for _, obj := range pc.parents.Informer().GetStore().List() {
		if key, err := cache.MetaNamespaceKeyFunc(obj); err == nil && in(key) {
			pc.enqueueParent(obj)
		}
	}
}

// childChanged queues the parent a child belongs to, unless the event is
// the echo of the loop's own write (the expectations); an orphan may match any
// parent in its namespace, so it queues them all. old is the child before
// an update, nil for an addition or a deletion (gone).
func (pc *parentLoop) childChanged(old, obj interface{}, gone bool) {
	if tombstone, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tombstone.Obj
	}
	child, ok := obj.(*unstructured.Unstructured)
	if !ok || !pc.rec.Def.OwnsChild(child) {
		// Not the controller's to claim (another decorator's attachment).
		if old != nil {
			pc.childChanged(nil, old, false)
		}
		return
	}
	key, owned := pc.controllerKey(child)
	if o, ok := old.(*unstructured.Unstructured); ok {
		// A child that changed controller, or lost one, concerns its
		// former parent too: not as an echo.
		if oldKey, oldOwned := pc.controllerKey(o); oldKey != key || oldOwned != owned {
			pc.childChanged(nil, o, false)
		}
	}
	if owned {
		if key == "" {
			return
		}
		gv, _ := schema.ParseGroupVersion(child.GetAPIVersion())
		id := expectations.Child{Group: gv.Group, Kind: child.GetKind(), Namespace: child.GetNamespace(), Name: child.GetName()}
		if pc.expectations.ChildObserved(key, id, child.GetResourceVersion(), gone, child.GetDeletionTimestamp() != nil) {
			pc.enqueue(key)
		}
		return
	}
	var objs []interface{}
	if pc.namespaced && child.GetNamespace() != "" {
		objs, _ = pc.parents.Informer().GetIndexer().ByIndex(cache.NamespaceIndex, child.GetNamespace())
	} else {
		objs = pc.parents.Informer().GetStore().List()
	}
	for _, obj := range objs {
		pc.enqueueParent(obj)
	}
}

// controllerKey is the key of the parent that controls child, with owned
// true when it has a controller at all; the key is "" when the controller
// is not of this loop's parent kind.
func (pc *parentLoop) controllerKey(child *unstructured.Unstructured) (key string, owned bool) {
	ref := metav1.GetControllerOfNoCopy(child)
	if ref == nil {
		return "", false
	}
	gv, err := schema.ParseGroupVersion(ref.APIVersion)
	if err != nil || gv.Group != pc.parentGVK.Group || ref.Kind != pc.parentGVK.Kind {
		return "", true
	}
	return parentKey(child.GetNamespace(), ref.Name, pc.namespaced), true
}

func parentKey(namespace, name string, namespaced bool) string {
	if !namespaced || namespace == "" {
		return name
	}
	return namespace + "/" + name
}
