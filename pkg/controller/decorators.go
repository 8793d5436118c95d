package controller

import (
	"reflect"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/cache"

	"github.com/composite-apiserver/composite-apiserver/apis/metacontroller/v1alpha1"
	"github.com/composite-apiserver/composite-apiserver/pkg/definition"
	informers "github.com/composite-apiserver/composite-apiserver/pkg/generated/informers/externalversions"
)

// ignoredChange tells whether, with ignoreStatusChanges, a parent's update
// from old to cur is not synced. A CompositeController ignores a change of
// status alone; a DecoratorController, as Metacontroller's, any change that
// leaves the generation, labels and annotations as they were and does not
// delete the object (a built-in kind's data has no generation).
func (pc *parentController) ignoredChange(old, cur *unstructured.Unstructured) bool {
	if pc.rec.Def.Kind != definition.KindDecorator {
		return onlyStatusChanged(old, cur)
	}
	return old.GetGeneration() == cur.GetGeneration() &&
		reflect.DeepEqual(old.GetLabels(), cur.GetLabels()) &&
		reflect.DeepEqual(old.GetAnnotations(), cur.GetAnnotations()) &&
		cur.GetDeletionTimestamp() == nil
}

// watchDecorators has the manager's queue follow DecoratorControllers as
// it follows CompositeControllers, under their kind's keys.
func (m *Manager) watchDecorators(factory informers.SharedInformerFactory) (cache.SharedIndexInformer, error) {
	dcInformer := factory.Metacontroller().V1alpha1().DecoratorControllers()
	m.dcLister = dcInformer.Lister()
	enqueue := func(obj interface{}) {
		if key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj); err == nil {
			m.queue.Add(decoratorKind.keyPrefix + key)
		}
	}
	_, err := dcInformer.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: enqueue,
		UpdateFunc: func(old, cur interface{}) {
			// Only spec changes restart a controller, and a new author.
			o, c := old.(*v1alpha1.DecoratorController), cur.(*v1alpha1.DecoratorController)
			if o.Generation != c.Generation || !equality.Semantic.DeepEqual(o.Status.Author, c.Status.Author) {
				enqueue(cur)
			}
		},
		DeleteFunc: enqueue,
	})
	return dcInformer.Informer(), err
}
