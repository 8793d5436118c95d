package rights

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"

	"github.com/composite-apiserver/composite-apiserver/apis/metacontroller/v1alpha1"
	syncengine "github.com/composite-apiserver/composite-apiserver/pkg/sync"
)

// AuthorRights are what a user must be allowed themselves to create or
// change a CompositeController: its loop does exactly that with the
// server's identity, so anything less would let them escalate through it —
// RBAC's own rule for Roles, applied to controllers.
func AuthorRights(cc *v1alpha1.CompositeController) ([]Right, error) {
	res, err := syncengine.ResourcesOf(cc)
	if err != nil {
		return nil, err
	}
	var out []Right
	for _, child := range res.Children {
		for _, v := range []string{"create", "update", "patch", "delete", "list", "watch"} {
			out = append(out, Right{Verb: v, Group: child.Group, Resource: child.Resource})
		}
	}
	for _, v := range []string{"get", "update"} {
		out = append(out, Right{Verb: v, Group: res.Parent.Group, Resource: res.Parent.Resource, Subresource: "status"})
	}
	return out, nil
}

// Escalation checks a request's user against AuthorRights through the
// server's delegated authorizer (kube-apiserver's SubjectAccessReviews).
type Escalation struct {
	Authorizer authorizer.Authorizer
}

// CheckAuthor answers Forbidden, naming every right the user lacks, when
// the user may not do what cc's loop would do.
func (e *Escalation) CheckAuthor(ctx context.Context, cc *v1alpha1.CompositeController) error {
	gr := schema.GroupResource{Group: v1alpha1.GroupName, Resource: "compositecontrollers"}
	user, ok := genericapirequest.UserFrom(ctx)
	if !ok {
		return apierrors.NewForbidden(gr, cc.Name, errors.New("no user in the request"))
	}
	needed, err := AuthorRights(cc)
	if err != nil {
		return apierrors.NewBadRequest(err.Error())
	}
	// All at once: each may be a SubjectAccessReview to kube-apiserver
	// (the delegating authorizer caches answers for a few seconds).
	denied := make([]bool, len(needed))
	errs := make([]error, len(needed))
	var wg sync.WaitGroup
	for i, r := range needed {
		wg.Add(1)
		go func() {
			defer wg.Done()
			decision, _, err := e.Authorizer.Authorize(ctx, authorizer.AttributesRecord{
				User: user, Verb: r.Verb, APIGroup: r.Group, Resource: r.Resource, Subresource: r.Subresource, ResourceRequest: true,
			})
			if err != nil && decision != authorizer.DecisionAllow {
				errs[i] = fmt.Errorf("can't check whether you may %s: %w", r, err)
			}
			denied[i] = decision != authorizer.DecisionAllow
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return apierrors.NewForbidden(gr, cc.Name, err)
	}
	var missing []string
	for i, r := range needed {
		if denied[i] {
			missing = append(missing, r.String())
		}
	}
	if len(missing) > 0 {
		return apierrors.NewForbidden(gr, cc.Name, fmt.Errorf(
			"its loop would act with composite-apiserver's identity on what you may not touch yourself; you may not %s (in all namespaces)",
			strings.Join(missing, ", ")))
	}
	return nil
}
