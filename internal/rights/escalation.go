package rights

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"golang.org/x/sync/errgroup"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"

	"github.com/composite-apiserver/composite-apiserver/apis/metacontroller/v1alpha1"
	"github.com/composite-apiserver/composite-apiserver/internal/definition"
)

// AuthorRights are what a user must be allowed themselves to create or
// change a controller: its loop does that with the server's identity, so
// anything less would let them escalate through it — RBAC's own rule for
// Roles, applied to controllers. They are derived from the loop's own
// rights (Needed), and differ from them on purpose, each for its reason:
//   - the parent: as the loop (get, list, watch, patch): it streams every
//     parent to the author's hook and puts its finalizer on them.
//   - the children: the author also needs update. The loop only applies
//     (patch) and deletes, but an author who may do that may rewrite any
//     child wholesale, so update is asked as the sign that they may.
//   - the parent's status: the author also needs get, to be one who may
//     read what the hook writes there.
//   - Events and ControllerRevisions are not asked: they are the server's
//     own records about the parents, written in its name, not objects an
//     author could read or shape through the controller.
//   - each Secret and ConfigMap the hooks' credentials and CA bundles
//     come from: get, on that object. The server reads it and sends what
//     it holds to the hook's URL, which the author chose.
//
// A controller with an identity (spec.serviceAccount) acts as it, and
// kube-apiserver judges what it does: its author needs only what `kubectl
// --as` needs, impersonate on that ServiceAccount.
func AuthorRights(def *definition.Definition) []definition.Right {
	if sa := def.ServiceAccount; sa != nil {
		return []definition.Right{ImpersonateRight(*sa)}
	}
	var out []definition.Right
	for _, r := range Needed(def) {
		switch {
		case r.Subresource == "" && def.IsParent(r.Group, r.Resource):
			out = append(out, r)
		case r.Subresource == "status" && def.IsParent(r.Group, r.Resource):
			if r.Verb == "update" {
				out = append(out, definition.Right{Verb: "get", Group: r.Group, Resource: r.Resource, Subresource: r.Subresource})
			}
			out = append(out, r)
		case r.Subresource == "" && def.IsChild(r.Group, r.Resource):
			out = append(out, r)
			if r.Verb == "create" {
				out = append(out, definition.Right{Verb: "update", Group: r.Group, Resource: r.Resource})
			}
		}
	}
	for _, ref := range def.References {
		out = append(out, ref.Right())
	}
	return out
}

// ImpersonateRight is the right to act as sa, which writing a controller
// that names it as its identity requires.
func ImpersonateRight(sa v1alpha1.ServiceAccountReference) definition.Right {
	return definition.Right{Verb: "impersonate", Resource: "serviceaccounts", Namespace: sa.Namespace, Name: sa.Name}
}

// Escalation checks a request's user against AuthorRights through the
// server's delegated authorizer (kube-apiserver's SubjectAccessReviews).
type Escalation struct {
	Authorizer authorizer.Authorizer
}

// CheckAuthor answers Forbidden, naming every right the user lacks, when
// the user may not do what the loop of controller (a v1alpha1
// CompositeController or DecoratorController) would do.
func (e *Escalation) CheckAuthor(ctx context.Context, controller runtime.Object) error {
	def, err := definition.Compile(controller, nil)
	if err != nil {
		return apierrors.NewBadRequest(err.Error())
	}
	gr := def.ControllerResource()
	missing, err := Missing(ctx, e.Authorizer, AuthorRights(def))
	if err != nil {
		return apierrors.NewForbidden(gr, def.Name, err)
	}
	return AuthorForbidden(gr, def, missing, "")
}

// AuthorForbidden is the answer to an author of def, a controller of the
// resource gr, who lacks the rights missing (in namespace, or in all
// namespaces when it is empty, unless a right names its object); nil when
// none are.
func AuthorForbidden(gr schema.GroupResource, def *definition.Definition, missing []definition.Right, namespace string) error {
	if len(missing) == 0 {
		return nil
	}
	where := "in all namespaces unless named"
	if namespace != "" {
		where = "in namespace " + namespace
	}
	names := make([]string, 0, len(missing))
	for _, r := range missing {
		names = append(names, r.String())
	}
	why := "its loop would act with composite-apiserver's identity on what you may not touch yourself"
	if sa := def.ServiceAccount; sa != nil {
		why = fmt.Sprintf("its loop would act as ServiceAccount %s/%s (spec.serviceAccount)", sa.Namespace, sa.Name)
	}
	return apierrors.NewForbidden(gr, def.Name, fmt.Errorf("%s; you may not %s (%s)", why, strings.Join(names, ", "), where))
}

// Missing returns the rights the request's user lacks, asking authz about
// all of them at once (maxConcurrentReviews at a time): each may be a
// SubjectAccessReview to kube-apiserver (the delegating authorizer caches
// answers for a few seconds).
func Missing(ctx context.Context, authz authorizer.Authorizer, needed []definition.Right) ([]definition.Right, error) {
	user, ok := genericapirequest.UserFrom(ctx)
	if !ok {
		return nil, errors.New("no user in the request")
	}
	denied := make([]bool, len(needed))
	errs := make([]error, len(needed))
	var g errgroup.Group
	g.SetLimit(maxConcurrentReviews)
	for i, r := range needed {
		g.Go(func() error {
			decision, _, err := authz.Authorize(ctx, authorizer.AttributesRecord{
				User: user, Verb: r.Verb, APIGroup: r.Group, Resource: r.Resource, Subresource: r.Subresource,
				Namespace: r.Namespace, Name: r.Name, ResourceRequest: true,
			})
			if err != nil && decision != authorizer.DecisionAllow {
				errs[i] = fmt.Errorf("can't check whether you may %s: %w", r, err)
			}
			denied[i] = decision != authorizer.DecisionAllow
			// Every answer is wanted, so no error cancels the others:
			// they are joined below.
			return nil
		})
	}
	_ = g.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	var missing []definition.Right
	for i, r := range needed {
		if denied[i] {
			missing = append(missing, r)
		}
	}
	return missing, nil
}

// AuthorRightsByScope splits AuthorRights(def) for a fleet preview, which
// reads the parents of the namespaces it previews and no others: the
// rights on namespaced parent and child resources are asked in each
// namespace previewed (InNamespace); the rest (named Secrets and
// ConfigMaps, cluster-scoped resources, and resources discovery could not
// place) as a create of the controller asks them.
func AuthorRightsByScope(def *definition.Definition) (cluster, namespaced []definition.Right) {
	scoped := map[schema.GroupResource]bool{}
	for _, r := range append([]definition.Resource{def.Parent}, childResources(def)...) {
		if r.Err == nil && r.Namespaced {
			scoped[r.GVR.GroupResource()] = true
		}
	}
	for _, r := range AuthorRights(def) {
		if r.Name == "" && scoped[schema.GroupResource{Group: r.Group, Resource: r.Resource}] {
			namespaced = append(namespaced, r)
		} else {
			cluster = append(cluster, r)
		}
	}
	return cluster, namespaced
}

// InNamespace is rights, each asked in namespace.
func InNamespace(rights []definition.Right, namespace string) []definition.Right {
	out := make([]definition.Right, len(rights))
	for i, r := range rights {
		r.Namespace = namespace
		out[i] = r
	}
	return out
}

func childResources(def *definition.Definition) []definition.Resource {
	out := make([]definition.Resource, 0, len(def.Children))
	for _, c := range def.Children {
		out = append(out, c.Resource)
	}
	return out
}
