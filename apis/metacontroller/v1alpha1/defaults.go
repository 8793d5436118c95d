package v1alpha1

import (
	"k8s.io/apimachinery/pkg/runtime"
)

// Defaults Metacontroller applies, so that a stored object says what the
// server will do rather than leaving it implicit.
const (
	DefaultServicePort            int32 = 80
	DefaultServiceProtocol              = "http"
	DefaultAuthorizationType            = "Bearer"
	DefaultCABundleKey                  = "ca.crt"
	DefaultClientTLSCertKey             = "tls.crt"
	DefaultClientTLSPrivateKeyKey       = "tls.key"
	DefaultBasicAuthUsernameKey         = "username"
	DefaultBasicAuthPasswordKey         = "password"
)

func addDefaultingFuncs(scheme *runtime.Scheme) error {
	return RegisterDefaults(scheme)
}

// SetDefaults_CompositeControllerChildResourceRule defaults the update
// method to OnDelete, Metacontroller's default.
func SetDefaults_CompositeControllerChildResourceRule(obj *CompositeControllerChildResourceRule) {
	if obj.UpdateStrategy == nil {
		obj.UpdateStrategy = &CompositeControllerChildUpdateStrategy{}
	}
	if obj.UpdateStrategy.Method == "" {
		obj.UpdateStrategy.Method = ChildUpdateOnDelete
	}
}

// SetDefaults_DecoratorControllerAttachmentRule defaults the update method
// to OnDelete, Metacontroller's default, as for a CompositeController's
// children.
func SetDefaults_DecoratorControllerAttachmentRule(obj *DecoratorControllerAttachmentRule) {
	if obj.UpdateStrategy == nil {
		obj.UpdateStrategy = &DecoratorControllerAttachmentUpdateStrategy{}
	}
	if obj.UpdateStrategy.Method == "" {
		obj.UpdateStrategy.Method = ChildUpdateOnDelete
	}
}

// SetDefaults_Hook defaults the contract version to v1. The decoding mode
// is not defaulted: it follows the version (loose for v1, strict for v2,
// as Metacontroller works it out when it calls), and a stored default
// would outlive a change of version, since kubectl apply never removes a
// field it did not set. The compiled definition resolves it.
func SetDefaults_Hook(obj *Hook) {
	if obj.Version == nil {
		v := HookVersionV1
		obj.Version = &v
	}
}

// SetDefaults_PatchHook defaults a patch hook's decoding mode to strict:
// the patch contract is this server's own, with no lenient past to keep.
func SetDefaults_PatchHook(obj *PatchHook) {
	if obj.Webhook != nil && obj.Webhook.ResponseUnMarshallMode == nil {
		mode := ResponseUnmarshallModeStrict
		obj.Webhook.ResponseUnMarshallMode = &mode
	}
}

// SetDefaults_ServiceReference defaults the port and protocol.
func SetDefaults_ServiceReference(obj *ServiceReference) {
	if obj.Port == nil {
		p := DefaultServicePort
		obj.Port = &p
	}
	if obj.Protocol == nil {
		p := DefaultServiceProtocol
		obj.Protocol = &p
	}
}

// SetDefaults_CABundleConfig defaults the key of a referenced CA bundle.
func SetDefaults_CABundleConfig(obj *CABundleConfig) {
	for _, ref := range []*KeyReference{obj.SecretRef, obj.ConfigMapRef} {
		if ref != nil && ref.Key == "" {
			ref.Key = DefaultCABundleKey
		}
	}
}

// SetDefaults_ClientTLSConfig defaults the certificate and key names.
func SetDefaults_ClientTLSConfig(obj *ClientTLSConfig) {
	if obj.CertKey == "" {
		obj.CertKey = DefaultClientTLSCertKey
	}
	if obj.PrivateKeyKey == "" {
		obj.PrivateKeyKey = DefaultClientTLSPrivateKeyKey
	}
}

// SetDefaults_AuthorizationConfig defaults the scheme to Bearer.
func SetDefaults_AuthorizationConfig(obj *AuthorizationConfig) {
	if obj.Type == "" {
		obj.Type = DefaultAuthorizationType
	}
}

// SetDefaults_BasicAuthConfig defaults the username and password keys.
func SetDefaults_BasicAuthConfig(obj *BasicAuthConfig) {
	if obj.UsernameKey == "" {
		obj.UsernameKey = DefaultBasicAuthUsernameKey
	}
	if obj.PasswordKey == "" {
		obj.PasswordKey = DefaultBasicAuthPasswordKey
	}
}
