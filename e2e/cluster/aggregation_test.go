package cluster

import (
	"context"
	"strings"
	"testing"
)

func TestAPIResourcesListsCompositeControllersWithShortNames(t *testing.T) {
	dumpLogsOnFailure(t)
	out, stderr, err := stack.Kubectl(context.Background(), "api-resources", "--api-group=metacontroller.k8s.io")
	if err != nil {
		t.Fatalf("kubectl api-resources: %v: %s", err, stderr)
	}
	if !strings.Contains(out, "compositecontrollers") || !strings.Contains(out, "cc,cctl") {
		t.Fatalf("api-resources does not list compositecontrollers with short names cc,cctl:\n%s", out)
	}
}
