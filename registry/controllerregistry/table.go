package controllerregistry

import (
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/duration"

	"github.com/composite-apiserver/composite-apiserver/apis/metacontroller"
)

// ObjectMetaDescriptions describe the Name and Age columns.
var ObjectMetaDescriptions = metav1.ObjectMeta{}.SwaggerDoc()

// NewTable starts the table of obj (one object or a list) with columns.
func NewTable(obj runtime.Object, columns []metav1.TableColumnDefinition) *metav1.Table {
	table := &metav1.Table{ColumnDefinitions: columns}
	if m, err := meta.ListAccessor(obj); err == nil {
		table.ResourceVersion = m.GetResourceVersion()
		table.Continue = m.GetContinue()
		table.RemainingItemCount = m.GetRemainingItemCount()
	} else if m, err := meta.CommonAccessor(obj); err == nil {
		table.ResourceVersion = m.GetResourceVersion()
	}
	return table
}

// ResourceString is a resource rule as apiVersion/resource.
func ResourceString(r metacontroller.ResourceRule) string {
	return r.APIVersion + "/" + r.Resource
}

// HookString names where a hook is called: its url, or the service, port
// and path it resolves to.
func HookString(h *metacontroller.Hook) string {
	if h == nil || h.Webhook == nil {
		return "<none>"
	}
	w := h.Webhook
	if w.URL != nil {
		return *w.URL
	}
	if s := w.Service; s != nil {
		out := s.Namespace + "/" + s.Name
		if s.Port != nil {
			out += fmt.Sprintf(":%d", *s.Port)
		}
		if w.Path != nil {
			out += *w.Path
		}
		return out
	}
	return "<none>"
}

// ReadyString is the status of the Ready condition, Unknown without one.
func ReadyString(conditions []metav1.Condition) string {
	if c := meta.FindStatusCondition(conditions, metacontroller.ConditionReady); c != nil {
		return string(c.Status)
	}
	return string(metav1.ConditionUnknown)
}

// SinceString is how long ago t was, <never> when unset.
func SinceString(t *metav1.Time) string {
	if t == nil {
		return "<never>"
	}
	return duration.HumanDuration(time.Since(t.Time))
}
