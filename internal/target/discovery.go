package target

import (
	"context"
	"fmt"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/restmapper"
	"k8s.io/klog/v2"
)

const (
	// DefaultDiscoveryRefresh is how often discovery is read again whatever
	// happens, as Metacontroller does (its --discovery-interval): a CRD
	// installed or changed is seen within this period even by a controller
	// that never asked for it.
	DefaultDiscoveryRefresh = 30 * time.Second
	// minRefreshOnMiss bounds how often a lookup that finds nothing reads
	// discovery again: a hook answering with an unknown kind on every sync
	// must not turn into a discovery storm.
	minRefreshOnMiss = time.Second
)

// Discovery is the target cluster's discovery: a RESTMapper over a cached
// discovery client that reads the cluster again when a lookup misses (a CRD
// applied together with its controller is found as soon as it is served)
// and every refresh period. client-go's DeferredDiscoveryRESTMapper alone
// never does the former once its cache is filled: a memory cache counts as
// fresh forever.
type Discovery struct {
	cached discovery.CachedDiscoveryInterface
	mapper *restmapper.DeferredDiscoveryRESTMapper
	now    func() time.Time

	mu        sync.Mutex
	lastReset time.Time
	listeners []func()
	// mappings and kinds remember RESTMapping's answers for one version
	// and KindFor's until the next refresh: the loop resolves each child
	// and each child resource of each sync, and the deferred mapper
	// answers each time by walking every group the cluster serves,
	// allocating an error for each that does not match. generation counts
	// the refreshes, so that an answer read before one is not kept after
	// it.
	mappings   map[mappingKey]meta.RESTMapping
	kinds      map[schema.GroupVersionResource]schema.GroupVersionKind
	generation uint64
}

type mappingKey struct {
	gk      schema.GroupKind
	version string
}

var _ meta.RESTMapper = &Discovery{}

// NewDiscovery returns the discovery of the cluster client talks to.
func NewDiscovery(client discovery.DiscoveryInterface) *Discovery {
	cached := memory.NewMemCacheClient(client)
	return &Discovery{cached: cached, mapper: restmapper.NewDeferredDiscoveryRESTMapper(cached), now: time.Now}
}

// Run reads discovery again every period until ctx is done, and tells the
// listeners each time.
func (d *Discovery) Run(ctx context.Context, period time.Duration) {
	wait.UntilWithContext(ctx, func(ctx context.Context) {
		klog.FromContext(ctx).V(4).Info("Refreshing discovery of the target cluster")
		d.Reset()
	}, period)
}

// OnRefresh registers f to be called after every refresh, e.g. to retry
// controllers whose resources were not served.
func (d *Discovery) OnRefresh(f func()) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.listeners = append(d.listeners, f)
}

// Reset drops what discovery knows; the next lookup reads the cluster.
func (d *Discovery) Reset() {
	d.mu.Lock()
	d.lastReset = d.now()
	listeners := append([]func(){}, d.listeners...)
	d.mu.Unlock()
	d.mapper.Reset()
	// After the mapper's reset: a lookup that read the old discovery and
	// ends after this is not kept (generation), one that ended before it
	// is dropped here.
	d.mu.Lock()
	d.generation++
	d.mappings, d.kinds = nil, nil
	d.mu.Unlock()
	for _, f := range listeners {
		f()
	}
}

// Known is what discovery knows now, without reading the cluster again on
// a miss: for a check that runs after every refresh (is a running
// controller's definition stale?) and must not itself cause one.
func (d *Discovery) Known() meta.RESTMapper { return d.mapper }

// refreshOnMiss resets discovery after a lookup found nothing, unless that
// was done less than minRefreshOnMiss ago. It says whether a retry may find
// more.
func (d *Discovery) refreshOnMiss(err error) bool {
	if !meta.IsNoMatchError(err) {
		return false
	}
	d.mu.Lock()
	if d.now().Sub(d.lastReset) < minRefreshOnMiss {
		d.mu.Unlock()
		return false
	}
	d.mu.Unlock()
	d.Reset()
	return true
}

// KindFor implements meta.RESTMapper. An answer is remembered until the
// next refresh, as RESTMapping's; a miss is not.
func (d *Discovery) KindFor(resource schema.GroupVersionResource) (schema.GroupVersionKind, error) {
	return remembered(d, &d.kinds, resource, func() (schema.GroupVersionKind, error) {
		gvk, err := d.mapper.KindFor(resource)
		if d.refreshOnMiss(err) {
			gvk, err = d.mapper.KindFor(resource)
		}
		return gvk, err
	})
}

// KindsFor implements meta.RESTMapper.
func (d *Discovery) KindsFor(resource schema.GroupVersionResource) ([]schema.GroupVersionKind, error) {
	gvks, err := d.mapper.KindsFor(resource)
	if d.refreshOnMiss(err) {
		gvks, err = d.mapper.KindsFor(resource)
	}
	return gvks, err
}

// ResourceFor implements meta.RESTMapper.
func (d *Discovery) ResourceFor(input schema.GroupVersionResource) (schema.GroupVersionResource, error) {
	gvr, err := d.mapper.ResourceFor(input)
	if d.refreshOnMiss(err) {
		gvr, err = d.mapper.ResourceFor(input)
	}
	return gvr, err
}

// ResourcesFor implements meta.RESTMapper.
func (d *Discovery) ResourcesFor(input schema.GroupVersionResource) ([]schema.GroupVersionResource, error) {
	gvrs, err := d.mapper.ResourcesFor(input)
	if d.refreshOnMiss(err) {
		gvrs, err = d.mapper.ResourcesFor(input)
	}
	return gvrs, err
}

// RESTMapping implements meta.RESTMapper. An answer for one version is
// remembered until the next refresh; a miss is not, and reads discovery
// again (refreshOnMiss).
func (d *Discovery) RESTMapping(gk schema.GroupKind, versions ...string) (*meta.RESTMapping, error) {
	if len(versions) != 1 {
		return d.restMapping(gk, versions...)
	}
	m, err := remembered(d, &d.mappings, mappingKey{gk: gk, version: versions[0]}, func() (meta.RESTMapping, error) {
		m, err := d.restMapping(gk, versions...)
		if err != nil {
			return meta.RESTMapping{}, err
		}
		return *m, nil
	})
	if err != nil {
		return nil, err
	}
	return &m, nil
}

// remembered answers key from *known, or else from lookup, and keeps
// lookup's answer in *known unless it failed or discovery was refreshed
// while it ran.
func remembered[K comparable, V any](d *Discovery, known *map[K]V, key K, lookup func() (V, error)) (V, error) {
	d.mu.Lock()
	v, ok := (*known)[key]
	generation := d.generation
	d.mu.Unlock()
	if ok {
		return v, nil
	}
	v, err := lookup()
	if err != nil {
		return v, err
	}
	d.mu.Lock()
	if d.generation == generation {
		if *known == nil {
			*known = map[K]V{}
		}
		(*known)[key] = v
	}
	d.mu.Unlock()
	return v, nil
}

func (d *Discovery) restMapping(gk schema.GroupKind, versions ...string) (*meta.RESTMapping, error) {
	m, err := d.mapper.RESTMapping(gk, versions...)
	if d.refreshOnMiss(err) {
		m, err = d.mapper.RESTMapping(gk, versions...)
	}
	return m, err
}

// RESTMappings implements meta.RESTMapper.
func (d *Discovery) RESTMappings(gk schema.GroupKind, versions ...string) ([]*meta.RESTMapping, error) {
	ms, err := d.mapper.RESTMappings(gk, versions...)
	if d.refreshOnMiss(err) {
		ms, err = d.mapper.RESTMappings(gk, versions...)
	}
	return ms, err
}

// ResourceSingularizer implements meta.RESTMapper.
func (d *Discovery) ResourceSingularizer(resource string) (string, error) {
	return d.mapper.ResourceSingularizer(resource)
}

// HasSubresource tells whether the cluster serves subresource (e.g.
// "status") of gvr.
func (d *Discovery) HasSubresource(gvr schema.GroupVersionResource, subresource string) (bool, error) {
	list, err := d.cached.ServerResourcesForGroupVersion(gvr.GroupVersion().String())
	if err != nil {
		return false, fmt.Errorf("can't discover the resources of %s: %w", gvr.GroupVersion(), err)
	}
	want := gvr.Resource + "/" + subresource
	for _, r := range list.APIResources {
		if r.Name == want {
			return true, nil
		}
	}
	return false, nil
}

// Client is the cached discovery client itself, e.g. for the cluster's
// OpenAPI documents.
func (d *Discovery) Client() discovery.CachedDiscoveryInterface { return d.cached }
