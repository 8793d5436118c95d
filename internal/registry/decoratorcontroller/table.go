package decoratorcontroller

import (
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/composite-apiserver/composite-apiserver/apis/metacontroller"
	"github.com/composite-apiserver/composite-apiserver/internal/registry/controllerregistry"
)

// tableConvertor prints DecoratorControllers for kubectl, as
// `kubectl get decoratorcontrollers` shows them; columns with priority 1
// appear only with -o wide.
var tableConvertor = controllerregistry.TableConvertor[*metacontroller.DecoratorController]{
	Columns: []metav1.TableColumnDefinition{
		controllerregistry.NameColumn,
		{Name: "Resources", Type: "string", Description: "The decorated resources, as apiVersion/resource."},
		{Name: "Attachments", Type: "string", Description: "The attachment resources, by resource name."},
		controllerregistry.SyncHookColumn,
		controllerregistry.ReadyColumn,
		{Name: "Objects", Type: "integer", Description: "How many objects the controller decorates."},
		controllerregistry.AgeColumn,
		controllerregistry.FinalizeHookColumn,
		{Name: "Last Sync", Type: "string", Priority: 1, Description: "How long ago an object was last synced."},
		{Name: "Paused", Type: "integer", Priority: 1, Description: "How many of its objects are annotated composite.metacontroller.k8s.io/paused."},
		controllerregistry.RevisionColumn,
		controllerregistry.RolloutColumn,
		controllerregistry.MessageColumn,
	},
	Cells: func(dc *metacontroller.DecoratorController, name, age string) []interface{} {
		var resources, attachments []string
		for _, r := range dc.Spec.Resources {
			resources = append(resources, controllerregistry.ResourceString(r.ResourceRule))
		}
		for _, a := range dc.Spec.Attachments {
			attachments = append(attachments, a.Resource)
		}
		var sync, finalize *metacontroller.Hook
		if h := dc.Spec.Hooks; h != nil {
			sync, finalize = h.Sync, h.Finalize
		}
		return []interface{}{
			name,
			list(resources),
			list(attachments),
			controllerregistry.HookString(sync),
			controllerregistry.ReadyString(dc.Status.Conditions),
			int64(dc.Status.Objects),
			age,
			controllerregistry.HookString(finalize),
			controllerregistry.SinceString(dc.Status.LastSyncTime),
			int64(dc.Status.PausedObjects),
			max(dc.Status.Revision, 1),
			controllerregistry.RolloutString(dc.Status.Rollout),
			dc.Status.LastSyncError,
		}
	},
}

func list(items []string) string {
	if len(items) == 0 {
		return "<none>"
	}
	return strings.Join(items, ",")
}
