// Package registrytest gives registry tests a real etcd to store on.
package registrytest

import (
	"testing"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apiserver/pkg/registry/generic"
	etcd3testing "k8s.io/apiserver/pkg/storage/etcd3/testing"

	"github.com/composite-apiserver/composite-apiserver/apis/metacontroller"
	"github.com/composite-apiserver/composite-apiserver/apis/metacontroller/install"
	"github.com/composite-apiserver/composite-apiserver/apis/metacontroller/v1alpha1"
)

// RESTOptions starts an etcd for the test and returns the scheme of the
// group and the options that store resource in it, as v1alpha1.
func RESTOptions(t *testing.T, resource string) (*runtime.Scheme, generic.RESTOptions) {
	t.Helper()
	scheme := runtime.NewScheme()
	install.Install(scheme)
	codecs := serializer.NewCodecFactory(scheme)
	_, etcdConfig := etcd3testing.NewUnsecuredEtcd3TestClientServer(t)
	etcdConfig.Codec = codecs.LegacyCodec(v1alpha1.SchemeGroupVersion)
	return scheme, generic.RESTOptions{
		StorageConfig:           etcdConfig.ForResource(metacontroller.Resource(resource)),
		Decorator:               generic.UndecoratedStorage,
		DeleteCollectionWorkers: 1,
		ResourcePrefix:          resource,
	}
}
