package controllerregistry

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/composite-apiserver/composite-apiserver/apis/metacontroller/v1alpha1"
)

// StampResume makes a resume requested by a write of obj (stored as
// stored, nil on create) carry this server's time of the write, whatever
// time the client wrote in the annotation: the rollout compares it with
// status.rollout.pausedTime, which the server's clock stamped, and a
// client's clock ahead would resume every failure to come, one behind
// would resume none (R16). A write that leaves the annotation as stored,
// or removes it, asks for no resume and changes nothing.
func StampResume(obj, stored *metav1.ObjectMeta) {
	written, ok := obj.Annotations[v1alpha1.RolloutResumedAnnotation]
	if !ok || (stored != nil && stored.Annotations[v1alpha1.RolloutResumedAnnotation] == written) {
		return
	}
	obj.Annotations[v1alpha1.RolloutResumedAnnotation] = time.Now().UTC().Format(time.RFC3339Nano)
}
