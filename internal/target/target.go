// Package target is the handle on the cluster whose parents and children
// composite-apiserver syncs: the cluster of --kubeconfig, or the one the
// server runs in. The controller loop and /sync share it.
package target

import (
	"context"
	"fmt"
	"sync"

	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/authentication/serviceaccount"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"

	"github.com/composite-apiserver/composite-apiserver/internal/fieldowner"
	"github.com/composite-apiserver/composite-apiserver/internal/watchjson"
)

// Cluster reaches the target cluster.
type Cluster struct {
	// Dynamic gets, lists and writes any resource; the objects it answers
	// with are decoded in one pass (watchjson), and are the caller's own.
	Dynamic dynamic.Interface
	// Informers is the dynamic client the loop's informers list and
	// watch through: it decodes each watch event in one pass
	// (watchjson), where an informer spends most of its time.
	Informers dynamic.Interface
	// Metadata reads and writes objects and answers with their metadata
	// only: the children's applies, whose answers the loop needs only the
	// resourceVersion of.
	Metadata metadata.Interface
	Kube     kubernetes.Interface
	// Discovery maps kinds to resources and refreshes itself when a kind
	// is unknown, so CRDs installed later are found.
	Discovery *Discovery
	// Schemas are the cluster's OpenAPI schemas, with which a desired
	// child is compared with what the controller applied before; they are
	// read again whenever discovery is.
	Schemas *fieldowner.Schemas

	// config is what the clients were made of; As impersonates with it.
	config *rest.Config
	// identities are the clients As made, by user name.
	identities sync.Map

	// selfMu guards self, the server's own user name here once known.
	selfMu sync.Mutex
	self   string
}

// Username is who kube-apiserver authenticates the server's clients as (a
// ServiceAccount in a cluster, whatever user --kubeconfig names), as a
// SelfSubjectReview answers: its writes to this server's own resources
// come back through kube-apiserver's aggregator in that name. Asked once;
// a failure is asked again next time.
func (c *Cluster) Username(ctx context.Context) (string, error) {
	c.selfMu.Lock()
	defer c.selfMu.Unlock()
	if c.self != "" {
		return c.self, nil
	}
	review, err := c.Kube.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("can't ask the target cluster who this server is: %w", err)
	}
	if review.Status.UserInfo.Username == "" {
		return "", fmt.Errorf("can't tell who this server is: the target cluster's SelfSubjectReview names no user")
	}
	c.self = review.Status.UserInfo.Username
	return c.self, nil
}

// Clients write to the target cluster as one identity.
type Clients struct {
	Dynamic  dynamic.Interface
	Metadata metadata.Interface
	Kube     kubernetes.Interface
}

// As returns clients that impersonate the ServiceAccount namespace/name, so
// that kube-apiserver's RBAC judges what they do as that ServiceAccount
// (which gets its groups from kube-apiserver, as `kubectl --as` does). They
// share the server's connections: impersonation is a header.
func (c *Cluster) As(namespace, name string) (*Clients, error) {
	username := serviceaccount.MakeUsername(namespace, name)
	if got, ok := c.identities.Load(username); ok {
		return got.(*Clients), nil
	}
	if c.config == nil {
		return nil, fmt.Errorf("can't act as %s: no client configuration", username)
	}
	config := rest.CopyConfig(c.config)
	config.Impersonate = rest.ImpersonationConfig{UserName: username}
	clients, err := newClients(config)
	if err != nil {
		return nil, fmt.Errorf("can't create a client acting as %s: %w", username, err)
	}
	got, _ := c.identities.LoadOrStore(username, clients)
	return got.(*Clients), nil
}

// New connects to the cluster of config.
func New(config *rest.Config) (*Cluster, error) {
	clients, err := newClients(config)
	if err != nil {
		return nil, fmt.Errorf("can't create a client of the target cluster: %w", err)
	}
	// The informers ask for no compression, and so take an HTTP client
	// (and a connection) of their own. kube-apiserver 1.37 gzips a
	// watch-list stream for a client that accepts it (WatchListCompression,
	// beta), flushing each event as a gzip stream of its own: both ends
	// spend CPU on every event of every child, to save bytes on a
	// connection that is usually inside the cluster.
	watchConfig := rest.CopyConfig(config)
	watchConfig.DisableCompression = true
	informers, err := watchjson.NewForConfig(watchConfig)
	if err != nil {
		return nil, fmt.Errorf("can't create the informers' client of the target cluster: %w", err)
	}
	kube := clients.Kube
	disc := NewDiscovery(kube.Discovery())
	schemas := fieldowner.NewSchemas(disc.Client().OpenAPIV3())
	disc.OnRefresh(schemas.Reset)
	return &Cluster{Dynamic: clients.Dynamic, Informers: informers, Metadata: clients.Metadata, Kube: kube, Discovery: disc, Schemas: schemas, config: rest.CopyConfig(config)}, nil
}

// newClients makes one identity's clients over one HTTP client, where each
// of their NewForConfig would make its own of config.
func newClients(config *rest.Config) (*Clients, error) {
	config = rest.CopyConfig(config)
	if config.UserAgent == "" {
		// What each client's NewForConfig would set before making its
		// HTTP client.
		config.UserAgent = rest.DefaultKubernetesUserAgent()
	}
	httpClient, err := rest.HTTPClientFor(config)
	if err != nil {
		return nil, err
	}
	kube, err := kubernetes.NewForConfigAndClient(builtinTypesConfig(config), httpClient)
	if err != nil {
		return nil, err
	}
	dyn, err := watchjson.NewForConfigAndClient(config, httpClient)
	if err != nil {
		return nil, err
	}
	meta, err := metadata.NewForConfigAndClient(config, httpClient)
	if err != nil {
		return nil, err
	}
	return &Clients{Dynamic: dyn, Metadata: meta, Kube: kube}, nil
}

// builtinTypesConfig is config for the clientset of Kubernetes' own types,
// in protobuf for every request, as Kubernetes' own components configure
// theirs (component-base's default for their client connections). client-go
// sends its generated methods' requests in protobuf already, but not those
// it builds by hand with the config's content type, which is JSON when
// unset: the Event sink's creates among them, one for each parent whose
// children a sync created, the loop's most frequent write after the
// applies and the status writes. Every type this clientset writes has a
// protobuf encoding, cheaper to write and read at both ends. The dynamic
// and metadata clients choose their own encodings; a content type the
// caller set is kept.
func builtinTypesConfig(config *rest.Config) *rest.Config {
	if config.ContentType != "" || config.AcceptContentTypes != "" {
		return config
	}
	c := rest.CopyConfig(config)
	c.ContentType = runtime.ContentTypeProtobuf
	c.AcceptContentTypes = runtime.ContentTypeProtobuf + "," + runtime.ContentTypeJSON
	return c
}
