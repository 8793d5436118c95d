package controllerregistry

import (
	"context"

	"k8s.io/apimachinery/pkg/util/validation/field"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"

	"github.com/composite-apiserver/composite-apiserver/apis/metacontroller"
)

// AuthorOf is the user of the request in ctx, as the controller's author;
// nil when the request has none.
func AuthorOf(ctx context.Context) *metacontroller.ControllerAuthor {
	u, ok := genericapirequest.UserFrom(ctx)
	if !ok || u == nil {
		return nil
	}
	a := &metacontroller.ControllerAuthor{Username: u.GetName(), UID: u.GetUID(), Groups: u.GetGroups()}
	if extra := u.GetExtra(); len(extra) > 0 {
		a.Extra = make(map[string]metacontroller.ExtraValue, len(extra))
		for k, v := range extra {
			a.Extra[k] = v
		}
	}
	return a
}

// ValidateIdentity refuses a controller without a ServiceAccount (sa nil)
// on a server whose operator runs none with the server's own rights.
func ValidateIdentity(required bool, sa *metacontroller.ServiceAccountReference) field.ErrorList {
	if required && sa == nil {
		return field.ErrorList{field.Required(field.NewPath("spec", "serviceAccount"),
			"this server runs only controllers that act as a ServiceAccount (--require-controller-service-account): name one your user may impersonate")}
	}
	return nil
}
