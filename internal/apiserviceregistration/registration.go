// Package apiserviceregistration registers this server's APIService with
// kube-apiserver's aggregator, from the server itself, once it is ready to
// serve. An APIService registered while nobody answers behind it makes
// every namespace deletion in the cluster wait on the group's discovery
// (NamespaceDeletionDiscoveryFailure); registered by a replica that is
// ready, it exists only once there is an answer, and an install whose pods
// never come up leaves the cluster as it was.
package apiserviceregistration

import (
	"context"
	"fmt"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apiserver/pkg/server/dynamiccertificates"
	metav1apply "k8s.io/client-go/applyconfigurations/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	apiregistrationapply "k8s.io/kube-aggregator/pkg/client/applyconfiguration/apiregistration/v1"
	aggregator "k8s.io/kube-aggregator/pkg/client/clientset_generated/clientset"
)

// FieldManager is the server-side apply manager of the fields the server
// writes: every replica applies the same ones, so that their applies agree
// and only a change (the CA) makes a write.
const FieldManager = "composite-apiserver"

// Config is the APIService to register.
type Config struct {
	// Name, Group and Version are the APIService's.
	Name, Group, Version string
	// GroupPriorityMinimum and VersionPriority order the group among the
	// cluster's.
	GroupPriorityMinimum, VersionPriority int32
	// ServiceNamespace, ServiceName and ServicePort are the Service in
	// front of the server's replicas.
	ServiceNamespace, ServiceName string
	ServicePort                   int32
	// CAFile holds the CA the serving certificate chains to: the caBundle.
	// It is read again when it changes, so that a CA rotation reaches the
	// APIService.
	CAFile string
	// OwnerClusterRoleBinding names a ClusterRoleBinding made the
	// APIService's owner, so that deleting it (helm uninstall, kubectl
	// delete -k) has the garbage collector remove the APIService too;
	// empty sets no owner.
	OwnerClusterRoleBinding string
}

// Registrar applies the APIService, and applies it again whenever the CA
// file changes.
type Registrar struct {
	config     Config
	aggregator aggregator.Interface
	kube       kubernetes.Interface
	ca         *dynamiccertificates.DynamicFileCAContent
	// queue holds one key at most: "apply what is current", with the
	// retries of a failed apply spaced out.
	queue workqueue.TypedRateLimitingInterface[string]
}

const workKey = "apiservice"

// New reads the CA file once, so that a missing or unreadable one stops the
// server at start rather than leaving it unregistered.
func New(config Config, aggregatorClient aggregator.Interface, kubeClient kubernetes.Interface) (*Registrar, error) {
	ca, err := dynamiccertificates.NewDynamicCAContentFromFile("apiservice-ca-bundle", config.CAFile)
	if err != nil {
		return nil, fmt.Errorf("can't read the APIService's CA bundle: %w", err)
	}
	r := &Registrar{
		config: config, aggregator: aggregatorClient, kube: kubeClient, ca: ca,
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(
			// A refused apply (no owner yet, Metacontroller's APIService in
			// the way) is tried again within a minute of being fixed.
			workqueue.NewTypedItemExponentialFailureRateLimiter[string](time.Second, time.Minute),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "apiservice-registration"},
		),
	}
	ca.AddListener(r)
	return r, nil
}

// Enqueue asks for an apply: the CA file changed.
func (r *Registrar) Enqueue() { r.queue.Add(workKey) }

// Run applies the APIService now and whenever the CA file changes, until
// ctx is done. Call it once the server is ready to serve.
func (r *Registrar) Run(ctx context.Context) {
	defer utilruntime.HandleCrashWithContext(ctx)
	defer r.queue.ShutDown()
	go r.ca.Run(ctx, 1)
	r.Enqueue()
	go wait.UntilWithContext(ctx, r.runWorker, time.Second)
	<-ctx.Done()
}

func (r *Registrar) runWorker(ctx context.Context) {
	for r.processNextWorkItem(ctx) {
	}
}

func (r *Registrar) processNextWorkItem(ctx context.Context) bool {
	key, quit := r.queue.Get()
	if quit {
		return false
	}
	defer r.queue.Done(key)
	logger := klog.FromContext(ctx)
	if err := r.apply(ctx); err != nil {
		logger.Error(err, "Can't register the APIService, will retry", "apiService", r.config.Name)
		r.queue.AddRateLimited(key)
		return true
	}
	r.queue.Forget(key)
	logger.Info("Registered the APIService", "apiService", r.config.Name,
		"service", r.config.ServiceNamespace+"/"+r.config.ServiceName, "caFile", r.config.CAFile)
	return true
}

// apply writes the APIService as this server serves it, with the CA of
// now.
func (r *Registrar) apply(ctx context.Context) error {
	apiServices := r.aggregator.ApiregistrationV1().APIServices()
	existing, err := apiServices.Get(ctx, r.config.Name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
	case err != nil:
		return fmt.Errorf("can't read APIService %s: %w", r.config.Name, err)
	case existing.Spec.Service == nil:
		// kube-apiserver's own, for Metacontroller's CRDs of the group: it
		// manages it and would undo ours; it goes once they are deleted.
		return fmt.Errorf("APIService %s is kube-apiserver's own, serving Metacontroller's CustomResourceDefinitions of the group: "+
			"delete them (docs/migrating-from-metacontroller.md) and the server registers its own", r.config.Name)
	}
	desired := apiregistrationapply.APIService(r.config.Name).
		WithSpec(apiregistrationapply.APIServiceSpec().
			WithGroup(r.config.Group).
			WithVersion(r.config.Version).
			WithGroupPriorityMinimum(r.config.GroupPriorityMinimum).
			WithVersionPriority(r.config.VersionPriority).
			WithCABundle(r.ca.CurrentCABundleContent()...).
			WithService(apiregistrationapply.ServiceReference().
				WithNamespace(r.config.ServiceNamespace).
				WithName(r.config.ServiceName).
				WithPort(r.config.ServicePort)))
	if name := r.config.OwnerClusterRoleBinding; name != "" {
		owner, err := r.kube.RbacV1().ClusterRoleBindings().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			// Gone while the server still runs: being uninstalled, and the
			// APIService must not come back.
			return fmt.Errorf("can't read ClusterRoleBinding %s, the APIService's owner: %w", name, err)
		}
		desired.WithOwnerReferences(metav1apply.OwnerReference().
			WithAPIVersion(rbacv1.SchemeGroupVersion.String()).
			WithKind("ClusterRoleBinding").
			WithName(owner.Name).
			WithUID(owner.UID))
	}
	if _, err := apiServices.Apply(ctx, desired, metav1.ApplyOptions{FieldManager: FieldManager, Force: true}); err != nil {
		return fmt.Errorf("can't apply APIService %s: %w", r.config.Name, err)
	}
	return nil
}
