package framework

import "testing"

// TestKCMLogLinesAboutOurGroup: the lines TestMain fails a package for
// name our group, or a namespace deletion that failed for something other
// than pods still terminating (which on the pod stack is a deleted
// namespace's pods taking their grace period).
func TestKCMLogLinesAboutOurGroup(t *testing.T) {
	for line, ours := range map[string]bool{
		`E1202 14:48:46.900306   13377 namespace_controller.go:164] "Deletion of namespace failed" err="failed to delete pods for namespace: webs, err: unexpected items still remain in namespace: webs for gvr: /v1, Resource=pods" logger="UnhandledError" namespace="webs"`: false,
		`E1202 14:48:46.900306   13377 namespace_controller.go:164] "Deletion of namespace failed" err="unexpected items still remain in namespace: x for gvr: metacontroller.k8s.io/v1alpha1, Resource=controllerrevisions" logger="UnhandledError" namespace="x"`:             true,
		`E1202 14:48:46.900306   13377 namespace_controller.go:164] "Deletion of namespace failed" err="failed to discover" namespace="x"`:                                                                                                                                      true,
		`E1202 14:48:46.900306   13377 garbagecollector.go:360] "Unhandled Error" err="unable to sync metacontroller.k8s.io/v1alpha1"`:                                                                                                                                          true,
	} {
		if got := aboutOurGroup(line); got != ours {
			t.Errorf("%q: about our group %v, want %v", line, got, ours)
		}
	}
}
