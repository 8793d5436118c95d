package controllerregistry

import (
	"context"
	"time"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apiserver/pkg/authentication/user"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/klog/v2"

	"github.com/composite-apiserver/composite-apiserver/apis/metacontroller"
)

// Authors decides who becomes a controller's author: the user of the
// request that writes it (see the strategies), never this server itself.
type Authors struct {
	// Self is who the server is in the target cluster; nil without one.
	Self func(ctx context.Context) (string, error)
}

// Of is the request's user as the author of a controller; nil when the
// request has none, or when it is this server, which writes controllers
// (its decorator loops label them) but must never run one with its own
// rights checked against itself.
func (a Authors) Of(ctx context.Context) *metacontroller.ControllerAuthor {
	author := requestUser(ctx)
	// Unsure, the server may be the writer: recording nobody is safe.
	if author == nil || a.isServer(ctx, author.Username, true) {
		return nil
	}
	return author
}

// StatusRollout is the status.rollout a write through /status stores:
// written when this server writes it (its loop drives the rollout, through
// the loopback client), else stored. Which revision runs which parents
// follows status.rollout after a restart, on followers and for /sync, so
// nobody else may choose it; like the author and the history, a write of
// it by anyone else is ignored, not refused, as Kubernetes does with
// status fields a writer may not set.
func (a Authors) StatusRollout(ctx context.Context, written, stored *metacontroller.RolloutStatus) *metacontroller.RolloutStatus {
	if apiequality.Semantic.DeepEqual(written, stored) {
		return stored
	}
	// Unsure, the writer may be anyone: keeping the stored one is safe.
	if u := requestUser(ctx); u != nil && a.isServer(ctx, u.Username, false) {
		return written
	}
	return stored
}

// selfTimeout bounds the question of who the server is: a slow target
// cluster must not hold the user's write.
const selfTimeout = 3 * time.Second

// isServer tells whether username is this server: its loopback client, or
// its client of the target cluster, whose writes come back through
// kube-apiserver's aggregator. When the server can't tell who it is in
// the target cluster, the answer is unsure: the caller's safe side.
func (a Authors) isServer(ctx context.Context, username string, unsure bool) bool {
	if username == user.APIServerUser {
		return true
	}
	if a.Self == nil {
		return false
	}
	ctx, cancel := context.WithTimeout(ctx, selfTimeout)
	defer cancel()
	self, err := a.Self(ctx)
	if err != nil {
		klog.FromContext(ctx).Error(err, "Can't tell whether the writer of a controller is this server", "user", username, "assumed", unsure)
		return unsure
	}
	return username == self
}

// requestUser is the user of the request in ctx, as a controller's author;
// nil when the request has none.
func requestUser(ctx context.Context) *metacontroller.ControllerAuthor {
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
