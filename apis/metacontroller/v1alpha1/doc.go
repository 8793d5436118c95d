// +k8s:deepcopy-gen=package
// +k8s:conversion-gen=github.com/composite-apiserver/composite-apiserver/apis/metacontroller
// +k8s:defaulter-gen=TypeMeta
// +k8s:openapi-gen=true
// +k8s:openapi-model-package=io.k8s.metacontroller.apis.metacontroller.v1alpha1
// +groupName=metacontroller.k8s.io

// Package v1alpha1 is metacontroller.k8s.io/v1alpha1 as served on the wire:
// CompositeController, field for field Metacontroller's, so manifests
// written for Metacontroller apply unchanged, plus a status of our own.
package v1alpha1
