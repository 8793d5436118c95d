package decoratorcontroller

import (
	"context"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/authentication/user"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"

	"github.com/composite-apiserver/composite-apiserver/internal/registry/controllerregistry"
)

// As for CompositeControllers: the server writing a DecoratorController
// stored before authors were recorded never becomes its author (T12).
func TestTheServerWritingALegacyControllerDoesNotBecomeItsAuthor(t *testing.T) {
	const self = "system:serviceaccount:composite-system:composite-apiserver"
	s := NewStrategy(nil)
	s.authors = controllerregistry.Authors{Self: func(context.Context) (string, error) { return self, nil }}
	s.mayAuthor = func(context.Context, runtime.Object) bool { return true }
	for _, c := range []struct {
		writer, want string
	}{
		{writer: self},
		{writer: user.APIServerUser},
		{writer: "alice", want: "alice"},
	} {
		t.Run(c.writer, func(t *testing.T) {
			old := decorator("legacy")
			labelled := old.DeepCopy()
			labelled.Labels = map[string]string{"decorated": "yes"}
			s.PrepareForUpdate(genericapirequest.WithUser(requestCtx(), &user.DefaultInfo{Name: c.writer}), labelled, old)
			got := labelled.Status.Author
			if c.want == "" && got != nil {
				t.Errorf("%s labelling a controller without an author made itself its author", got.Username)
			}
			if c.want != "" && (got == nil || got.Username != c.want) {
				t.Errorf("author = %+v, want %s", got, c.want)
			}
		})
	}
}
