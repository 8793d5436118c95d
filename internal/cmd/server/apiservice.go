package server

import (
	"fmt"

	"github.com/spf13/pflag"
	genericapiserver "k8s.io/apiserver/pkg/server"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"
	aggregator "k8s.io/kube-aggregator/pkg/client/clientset_generated/clientset"

	"github.com/composite-apiserver/composite-apiserver/apis/metacontroller/v1alpha1"
	"github.com/composite-apiserver/composite-apiserver/internal/apiserviceregistration"
	"github.com/composite-apiserver/composite-apiserver/internal/migration"
)

// APIServiceOptions are the flags of the server registering its own
// APIService once it is ready (--register-apiservice).
type APIServiceOptions struct {
	Register bool
	Config   apiserviceregistration.Config
}

func newAPIServiceOptions() APIServiceOptions {
	return APIServiceOptions{Config: apiserviceregistration.Config{
		Name: migration.APIService, Group: v1alpha1.GroupName, Version: v1alpha1.SchemeGroupVersion.Version,
		GroupPriorityMinimum: 1000, VersionPriority: 15,
		ServiceNamespace: "composite-system", ServiceName: "composite-apiserver", ServicePort: 443,
	}}
}

// AddFlags adds the APIService's flags.
func (o *APIServiceOptions) AddFlags(fs *pflag.FlagSet) {
	c := &o.Config
	fs.BoolVar(&o.Register, "register-apiservice", o.Register,
		"Register the APIService "+c.Name+" with kube-apiserver once this server's /readyz passes (its storage and informers are up), "+
			"and apply it again whenever --apiservice-ca-file changes. Registered before a replica can answer, the APIService would make "+
			"every namespace deletion in the cluster wait while none does; so an install whose pods never become ready leaves the cluster as "+
			"it was. Every replica applies the same APIService (server-side apply, field manager "+apiserviceregistration.FieldManager+"). "+
			"The server needs get, patch and create on that APIService alone (an apply that creates is authorized with the object's name). "+
			"A deleted APIService is not registered again until a replica starts or the CA changes. Off in standalone mode.")
	fs.StringVar(&c.ServiceNamespace, "apiservice-service-namespace", c.ServiceNamespace, "Namespace of the Service in front of this server's replicas, the one the APIService names.")
	fs.StringVar(&c.ServiceName, "apiservice-service-name", c.ServiceName, "Name of the Service in front of this server's replicas, the one the APIService names.")
	fs.Int32Var(&c.ServicePort, "apiservice-service-port", c.ServicePort, "Port of that Service that kube-apiserver calls.")
	fs.StringVar(&c.CAFile, "apiservice-ca-file", c.CAFile,
		"PEM file of the CA the serving certificate chains to (a cert-manager or the chart's Secret's ca.crt): the APIService's caBundle, "+
			"with which kube-apiserver verifies this server. Read again when it changes, so that a CA rotation reaches the APIService. "+
			"Required with --register-apiservice.")
	fs.StringVar(&c.OwnerClusterRoleBinding, "apiservice-owner-clusterrolebinding", c.OwnerClusterRoleBinding,
		"ClusterRoleBinding made the APIService's owner, so that uninstalling it (helm uninstall, kubectl delete -k) has the garbage "+
			"collector remove the APIService; the server needs get on it, and does not register the APIService while it is missing. "+
			"Empty sets no owner: the APIService then stays until deleted by hand.")
	fs.Int32Var(&c.GroupPriorityMinimum, "apiservice-group-priority-minimum", c.GroupPriorityMinimum, "The APIService's spec.groupPriorityMinimum.")
	fs.Int32Var(&c.VersionPriority, "apiservice-version-priority", c.VersionPriority, "The APIService's spec.versionPriority.")
}

// Validate says what is missing for the registration.
func (o *APIServiceOptions) Validate() []error {
	if !o.Register {
		return nil
	}
	var errs []error
	c := o.Config
	if c.CAFile == "" {
		errs = append(errs, fmt.Errorf("--register-apiservice needs --apiservice-ca-file, the CA kube-apiserver verifies this server with"))
	}
	if c.ServiceNamespace == "" || c.ServiceName == "" {
		errs = append(errs, fmt.Errorf("--register-apiservice needs --apiservice-service-namespace and --apiservice-service-name"))
	}
	if c.ServicePort < 1 || c.ServicePort > 65535 {
		errs = append(errs, fmt.Errorf("--apiservice-service-port must be between 1 and 65535, got %d", c.ServicePort))
	}
	return errs
}

// postStartHook registers the APIService once the server answers /readyz,
// with the clients of the cluster of --kubeconfig (or the one the server
// runs in).
func (o *APIServiceOptions) postStartHook(clientConfig *rest.Config) (genericapiserver.PostStartHookFunc, error) {
	if clientConfig == nil {
		return nil, fmt.Errorf("--register-apiservice needs a cluster to register with: --kubeconfig, or the server's in-cluster configuration")
	}
	aggregatorClient, err := aggregator.NewForConfig(clientConfig)
	if err != nil {
		return nil, err
	}
	kubeClient, err := kubernetes.NewForConfig(clientConfig)
	if err != nil {
		return nil, err
	}
	registrar, err := apiserviceregistration.New(o.Config, aggregatorClient, kubeClient)
	if err != nil {
		return nil, err
	}
	return func(hookCtx genericapiserver.PostStartHookContext) error {
		// /readyz waits for every post-start hook, this one included, so
		// the wait runs on its own.
		go func() {
			klog.FromContext(hookCtx).Info("Registering the APIService once this server is ready", "apiService", o.Config.Name)
			if err := waitReady(hookCtx, hookCtx.LoopbackClientConfig); err != nil {
				return
			}
			registrar.Run(hookCtx)
		}()
		return nil
	}, nil
}
