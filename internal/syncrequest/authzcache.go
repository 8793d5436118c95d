package syncrequest

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"

	"k8s.io/apiserver/pkg/authorization/authorizer"
)

// requestAuthorizer asks each question of one request once: a fleet
// preview asks whether the caller may list the same children in the same
// namespace for every parent there, and each question may be a
// SubjectAccessReview to kube-apiserver. It is made per request, but not
// every question is the caller's: the controller's subject (its identity,
// or its author) is asked the same questions, so a question is keyed by
// who asks as well as by every attribute.
type requestAuthorizer struct {
	authz authorizer.Authorizer

	mu      sync.Mutex
	answers map[authzQuestion]authzAnswer
}

type authzQuestion struct {
	// user, uid, groups and extra are who asks: groups and extra encoded
	// (in order, and by sorted key) so that the question can be a map key.
	user, uid, groups, extra                                     string
	verb, namespace, group, version, resource, subresource, name string
	resourceRequest                                              bool
	path                                                         string
	// fieldSelector and labelSelector are the selectors an authorizer may
	// judge a list or watch by.
	fieldSelector, labelSelector string
}

type authzAnswer struct {
	decision authorizer.Decision
	reason   string
	err      error
}

// newRequestAuthorizer returns authz answering each question once; nil
// when authz is nil (no authorization: standalone).
func NewRequestAuthorizer(authz authorizer.Authorizer) authorizer.Authorizer {
	if authz == nil {
		return nil
	}
	a := &requestAuthorizer{authz: authz, answers: map[authzQuestion]authzAnswer{}}
	return authorizer.AuthorizerFunc(a.Authorize)
}

func (a *requestAuthorizer) Authorize(ctx context.Context, attrs authorizer.Attributes) (authorizer.Decision, string, error) {
	q := question(attrs)
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

// question is what attrs ask, and who asks it.
func question(attrs authorizer.Attributes) authzQuestion {
	q := authzQuestion{
		verb: attrs.GetVerb(), namespace: attrs.GetNamespace(), group: attrs.GetAPIGroup(), version: attrs.GetAPIVersion(),
		resource: attrs.GetResource(), subresource: attrs.GetSubresource(), name: attrs.GetName(),
		resourceRequest: attrs.IsResourceRequest(), path: attrs.GetPath(),
	}
	if u := attrs.GetUser(); u != nil {
		q.user, q.uid = u.GetName(), u.GetUID()
		q.groups = strings.Join(u.GetGroups(), "\x00")
		extra := u.GetExtra()
		keys := make([]string, 0, len(extra))
		for k := range extra {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		var b strings.Builder
		for _, k := range keys {
			b.WriteString(k + "\x00" + strings.Join(extra[k], "\x00") + "\x01")
		}
		q.extra = b.String()
	}
	if fs, err := attrs.GetFieldSelector(); err != nil {
		q.fieldSelector = "error: " + err.Error()
	} else if len(fs) > 0 {
		q.fieldSelector = fmt.Sprint(fs)
	}
	if ls, err := attrs.GetLabelSelector(); err != nil {
		q.labelSelector = "error: " + err.Error()
	} else if len(ls) > 0 {
		q.labelSelector = ls.String()
	}
	return q
}
