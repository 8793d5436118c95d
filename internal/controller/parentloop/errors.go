package parentloop

import (
	"errors"
	"fmt"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/composite-apiserver/composite-apiserver/internal/rights"
)

// ErrNotServed is a resource the target cluster does not serve (yet): the
// manager retries such a controller as soon as discovery changes.
var ErrNotServed = errors.New("not served by the target cluster")

// NoStatusError is a parent resource without a status subresource, which
// Metacontroller does not run a controller for: every sync ends in a
// status write.
type NoStatusError struct{ GVR schema.GroupVersionResource }

func (e *NoStatusError) Error() string {
	return fmt.Sprintf("parent resource %s (%s) has no status subresource: enable it (subresources: {status: {}} in its CRD) so that the hook's status can be written", e.GVR.GroupResource(), e.GVR.Version)
}

// ForbiddenError says which rights the server, or the controller's
// subject, lacks to run a controller; the manager checks again soon.
type ForbiddenError struct{ Message string }

func (e *ForbiddenError) Error() string { return e.Message }

// Forbidden makes a refusal a ForbiddenError, which the manager retries
// soon: rights are granted at any moment.
func Forbidden(err error) error {
	var f *rights.ForbiddenError
	if errors.As(err, &f) {
		return &ForbiddenError{Message: err.Error()}
	}
	return err
}
