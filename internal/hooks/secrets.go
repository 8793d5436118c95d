package hooks

import (
	"context"
	"errors"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// SecretSource reads the Secrets and ConfigMaps a webhook's caBundle,
// clientTLS, authorization and basicAuth refer to.
type SecretSource interface {
	// SecretData returns the data of a Secret.
	SecretData(ctx context.Context, namespace, name string) (map[string][]byte, error)
	// ConfigMapData returns the data of a ConfigMap.
	ConfigMapData(ctx context.Context, namespace, name string) (map[string]string, error)
}

// NewClusterSecretSource reads Secrets and ConfigMaps from the target cluster
// with client. It reads directly, not through an informer, because references
// are resolved once per controller definition and watching every Secret of a
// cluster for that would cost far more than a few GETs.
func NewClusterSecretSource(client kubernetes.Interface) SecretSource {
	return &clusterSecretSource{client: client}
}

type clusterSecretSource struct {
	client kubernetes.Interface
}

func (s *clusterSecretSource) SecretData(ctx context.Context, namespace, name string) (map[string][]byte, error) {
	secret, err := s.client.CoreV1().Secrets(namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("can't get Secret %s/%s: %w", namespace, name, err)
	}
	return secret.Data, nil
}

func (s *clusterSecretSource) ConfigMapData(ctx context.Context, namespace, name string) (map[string]string, error) {
	cm, err := s.client.CoreV1().ConfigMaps(namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("can't get ConfigMap %s/%s: %w", namespace, name, err)
	}
	return cm.Data, nil
}

// ErrNoCluster is returned (wrapped) by NoClusterSecretSource.
var ErrNoCluster = errors.New("reading Secrets and ConfigMaps needs a target cluster")

// NoClusterSecretSource is the SecretSource of a server without a target
// cluster (standalone mode). Hooks that reference no Secret or ConfigMap work
// with it; the others fail with an error that says why.
type NoClusterSecretSource struct{}

// SecretData always fails with ErrNoCluster.
func (NoClusterSecretSource) SecretData(_ context.Context, namespace, name string) (map[string][]byte, error) {
	return nil, fmt.Errorf("can't get Secret %s/%s: %w", namespace, name, ErrNoCluster)
}

// ConfigMapData always fails with ErrNoCluster.
func (NoClusterSecretSource) ConfigMapData(_ context.Context, namespace, name string) (map[string]string, error) {
	return nil, fmt.Errorf("can't get ConfigMap %s/%s: %w", namespace, name, ErrNoCluster)
}

var _ SecretSource = NoClusterSecretSource{}

// SecretsAs is where the hooks' credentials are read for a controller:
// with kube, its identity's client (rights.Actor.Kube), when it has one,
// else from server.
func SecretsAs(kube kubernetes.Interface, server SecretSource) SecretSource {
	if kube == nil {
		return server
	}
	return NewClusterSecretSource(kube)
}
