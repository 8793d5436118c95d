package controllerregistry

import (
	"context"
	"errors"
	"testing"

	"k8s.io/apiserver/pkg/authentication/user"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
)

const serverUser = "system:serviceaccount:composite-system:composite-apiserver"

// The server never becomes a controller's author, whichever of its
// identities writes: its loopback client, or its client of the target
// cluster (whose writes come back through kube-apiserver's aggregator).
// When it can't tell who it is, it records nobody rather than risk itself.
func TestTheServerIsNeverRecordedAsAuthor(t *testing.T) {
	resolved := func(context.Context) (string, error) { return serverUser, nil }
	unresolved := func(context.Context) (string, error) { return "", errors.New("kube-apiserver is unreachable") }
	cases := []struct {
		name   string
		self   func(context.Context) (string, error)
		writer string
		want   string
	}{
		{name: "a user is recorded", self: resolved, writer: "alice", want: "alice"},
		{name: "the server's identity in the target cluster is not", self: resolved, writer: serverUser},
		{name: "the loopback client is not", self: resolved, writer: user.APIServerUser},
		{name: "the loopback client is not, without a target cluster", writer: user.APIServerUser},
		{name: "a user is recorded without a target cluster", writer: "alice", want: "alice"},
		{name: "nobody is recorded while the server can't tell who it is", self: unresolved, writer: "alice"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ctx := genericapirequest.WithUser(context.Background(), &user.DefaultInfo{Name: c.writer})
			got := Authors{Self: c.self}.Of(ctx)
			switch {
			case c.want == "" && got != nil:
				t.Errorf("author = %q, want none", got.Username)
			case c.want != "" && (got == nil || got.Username != c.want):
				t.Errorf("author = %+v, want %q", got, c.want)
			}
		})
	}
}
