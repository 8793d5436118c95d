package framework

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	apidiscoveryv2 "k8s.io/api/apidiscovery/v2"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/discovery"

	"github.com/composite-apiserver/composite-apiserver/apis/metacontroller/v1alpha1"
)

// WaitDiscovered waits until kube-apiserver's aggregated discovery, the
// document kubectl maps kinds with, lists compositecontrollers and calls
// the group version current.
//
// The APIService can be Available before that: the aggregator fetches a
// server's discovery on a queue of its own, and when a fetch fails (the
// server was down) it keeps the group version with no resources, marked
// Stale, and retries with backoff. kubectl then says "no matches for kind
// CompositeController" (B8's restarts did).
func (s *Stack) WaitDiscovered(ctx context.Context) error {
	var last string
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
		data, err := s.Kube.Discovery().RESTClient().Get().AbsPath("/apis").
			SetHeader("Accept", discovery.AcceptV2).
			Do(ctx).Raw()
		if err != nil {
			last = err.Error()
			return false, nil
		}
		var doc apidiscoveryv2.APIGroupDiscoveryList
		if err := json.Unmarshal(data, &doc); err != nil {
			last = err.Error()
			return false, nil
		}
		gv := v1alpha1.SchemeGroupVersion
		last = "no group " + gv.Group
		for _, g := range doc.Items {
			if g.Name != gv.Group {
				continue
			}
			for _, v := range g.Versions {
				if v.Version != gv.Version {
					continue
				}
				var names []string
				for _, r := range v.Resources {
					names = append(names, r.Resource)
				}
				last = fmt.Sprintf("%s %s, resources %v", gv.Version, v.Freshness, names)
				if v.Freshness != apidiscoveryv2.DiscoveryFreshnessStale && slices.Contains(names, "compositecontrollers") {
					return true, nil
				}
			}
		}
		return false, nil
	})
	if err != nil {
		return fmt.Errorf("kube-apiserver's discovery never listed compositecontrollers (last: %s): %w", last, err)
	}
	return nil
}
