package compositecontroller

import (
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/composite-apiserver/composite-apiserver/apis/metacontroller"
	"github.com/composite-apiserver/composite-apiserver/internal/registry/controllerregistry"
)

// tableConvertor prints CompositeControllers for kubectl, as
// `kubectl get compositecontrollers` shows them; columns with priority 1
// appear only with -o wide.
var tableConvertor = controllerregistry.TableConvertor[*metacontroller.CompositeController]{
	Columns: []metav1.TableColumnDefinition{
		controllerregistry.NameColumn,
		{Name: "Parent", Type: "string", Description: "The parent resource, as apiVersion/resource."},
		{Name: "Children", Type: "string", Description: "The child resources, by resource name."},
		controllerregistry.SyncHookColumn,
		controllerregistry.ReadyColumn,
		{Name: "Parents", Type: "integer", Description: "How many parents the controller handles."},
		controllerregistry.AgeColumn,
		{Name: "Customize Hook", Type: "string", Priority: 1, Description: "Where the customize hook is called."},
		controllerregistry.FinalizeHookColumn,
		{Name: "Last Sync", Type: "string", Priority: 1, Description: "How long ago a parent was last synced."},
		{Name: "Paused", Type: "integer", Priority: 1, Description: "How many of its parents are annotated composite.metacontroller.k8s.io/paused."},
		controllerregistry.RevisionColumn,
		controllerregistry.RolloutColumn,
		controllerregistry.MessageColumn,
	},
	Cells: func(cc *metacontroller.CompositeController, name, age string) []interface{} {
		return []interface{}{
			name,
			controllerregistry.ResourceString(cc.Spec.ParentResource.ResourceRule),
			childrenString(cc.Spec.ChildResources),
			controllerregistry.HookString(hook(cc, func(h *metacontroller.CompositeControllerHooks) *metacontroller.Hook { return h.Sync })),
			controllerregistry.ReadyString(cc.Status.Conditions),
			int64(cc.Status.Parents),
			age,
			controllerregistry.HookString(hook(cc, func(h *metacontroller.CompositeControllerHooks) *metacontroller.Hook { return h.Customize })),
			controllerregistry.HookString(hook(cc, func(h *metacontroller.CompositeControllerHooks) *metacontroller.Hook { return h.Finalize })),
			controllerregistry.SinceString(cc.Status.LastSyncTime),
			int64(cc.Status.PausedParents),
			max(cc.Status.Revision, 1),
			controllerregistry.RolloutString(cc.Status.Rollout),
			cc.Status.LastSyncError,
		}
	},
}

func childrenString(children []metacontroller.CompositeControllerChildResourceRule) string {
	if len(children) == 0 {
		return "<none>"
	}
	names := make([]string, 0, len(children))
	for _, c := range children {
		names = append(names, c.Resource)
	}
	return strings.Join(names, ",")
}

func hook(cc *metacontroller.CompositeController, pick func(*metacontroller.CompositeControllerHooks) *metacontroller.Hook) *metacontroller.Hook {
	if cc.Spec.Hooks == nil {
		return nil
	}
	return pick(cc.Spec.Hooks)
}
