// +k8s:deepcopy-gen=package
// +groupName=metacontroller.k8s.io

// Package metacontroller is the internal version of the
// metacontroller.k8s.io API: what the registry, validation and the
// controller work with, whatever version a client speaks.
package metacontroller
