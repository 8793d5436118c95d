package syncrequest

import (
	"context"
	"sync"

	"k8s.io/apiserver/pkg/authorization/authorizer"
)

// requestAuthorizer asks each question of one request once: a fleet
// preview asks whether the caller may list the same children in the same
// namespace for every parent there, and each question may be a
// SubjectAccessReview to kube-apiserver. It is made per request, so every
// question is the same user's.
type requestAuthorizer struct {
	authz authorizer.Authorizer

	mu      sync.Mutex
	answers map[authzQuestion]authzAnswer
}

type authzQuestion struct {
	verb, namespace, group, version, resource, subresource, name string
	resourceRequest                                              bool
	path                                                         string
}

type authzAnswer struct {
	decision authorizer.Decision
	reason   string
	err      error
}

// newRequestAuthorizer returns authz answering each question once; nil
// when authz is nil (no authorization: standalone).
func newRequestAuthorizer(authz authorizer.Authorizer) authorizer.Authorizer {
	if authz == nil {
		return nil
	}
	a := &requestAuthorizer{authz: authz, answers: map[authzQuestion]authzAnswer{}}
	return authorizer.AuthorizerFunc(a.Authorize)
}

func (a *requestAuthorizer) Authorize(ctx context.Context, attrs authorizer.Attributes) (authorizer.Decision, string, error) {
	q := authzQuestion{
		verb: attrs.GetVerb(), namespace: attrs.GetNamespace(), group: attrs.GetAPIGroup(), version: attrs.GetAPIVersion(),
		resource: attrs.GetResource(), subresource: attrs.GetSubresource(), name: attrs.GetName(),
		resourceRequest: attrs.IsResourceRequest(), path: attrs.GetPath(),
	}
	a.mu.Lock()
	ans, ok := a.answers[q]
	a.mu.Unlock()
	if ok {
		return ans.decision, ans.reason, ans.err
	}
	ans.decision, ans.reason, ans.err = a.authz.Authorize(ctx, attrs)
	if ans.err == nil {
		// An error (kube-apiserver unreachable, say) is asked again.
		a.mu.Lock()
		a.answers[q] = ans
		a.mu.Unlock()
	}
	return ans.decision, ans.reason, ans.err
}
