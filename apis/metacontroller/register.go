package metacontroller

import (
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// GroupName is the API group served by composite-apiserver.
const GroupName = "metacontroller.k8s.io"

// SchemeGroupVersion is the internal version of the group.
var SchemeGroupVersion = schema.GroupVersion{Group: GroupName, Version: runtime.APIVersionInternal}

var (
	// SchemeBuilder registers the internal types in a scheme.
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)
	// AddToScheme registers the internal types in a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

// Kind qualifies an unqualified kind with this group.
func Kind(kind string) schema.GroupKind {
	return SchemeGroupVersion.WithKind(kind).GroupKind()
}

// Resource qualifies an unqualified resource with this group.
func Resource(resource string) schema.GroupResource {
	return SchemeGroupVersion.WithResource(resource).GroupResource()
}

func addKnownTypes(scheme *runtime.Scheme) error {
	scheme.AddKnownTypes(SchemeGroupVersion,
		&CompositeController{},
		&CompositeControllerList{},
		&DecoratorController{},
		&DecoratorControllerList{},
		&SyncRequest{},
		&FleetPreview{},
		&ControllerRevision{},
		&ControllerRevisionList{},
	)
	return nil
}
