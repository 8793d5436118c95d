package framework

// MetacontrollerDecorators are the DecoratorControllers of Metacontroller's
// examples, verbatim from github.com/metacontroller/metacontroller (the
// hooks' Deployments and Services are left out: they need images). Objects
// are the names of the DecoratorControllers each manifest holds.
var MetacontrollerDecorators = []struct {
	Name     string
	Manifest string
	Objects  []string
}{
	{
		Name:    "service-per-pod",
		Objects: []string{"service-per-pod", "pod-name-label"},
		Manifest: `apiVersion: metacontroller.k8s.io/v1alpha1
kind: DecoratorController
metadata:
  name: service-per-pod
spec:
  resources:
  - apiVersion: apps/v1
    resource: statefulsets
    annotationSelector:
      matchExpressions:
      - {key: service-per-pod-label, operator: Exists}
      - {key: service-per-pod-ports, operator: Exists}
  attachments:
  - apiVersion: v1
    resource: services
  hooks:
    sync:
      webhook:
        url: http://service-per-pod.metacontroller/sync-service-per-pod
    finalize:
      webhook:
        url: http://service-per-pod.metacontroller/finalize-service-per-pod
---
apiVersion: metacontroller.k8s.io/v1alpha1
kind: DecoratorController
metadata:
  name: pod-name-label
spec:
  resources:
  - apiVersion: v1
    resource: pods
    labelSelector:
      matchExpressions:
      - {key: pod-name, operator: DoesNotExist}
    annotationSelector:
      matchExpressions:
      - {key: pod-name-label, operator: Exists}
  hooks:
    sync:
      webhook:
        url: http://service-per-pod.metacontroller/sync-pod-name-label
`,
	},
	{
		Name:    "crd-roles",
		Objects: []string{"crd-role-controller"},
		Manifest: `---
apiVersion: metacontroller.k8s.io/v1alpha1
kind: DecoratorController
metadata:
  name: crd-role-controller
spec:
  resources:
   - apiVersion: apiextensions.k8s.io/v1
     resource: customresourcedefinitions
     annotationSelector:
       matchExpressions:
        - {key: enable-default-roles, operator: Exists}
  attachments:
  - apiVersion: rbac.authorization.k8s.io/v1
    resource: clusterroles
  hooks:
    sync:
      webhook:
        url: http://crd-role-controller.metacontroller/sync-crd-role
        timeout: 10s`,
	},
	{
		Name:    "clusteredparent",
		Objects: []string{"cluster-parent"},
		Manifest: `apiVersion: metacontroller.k8s.io/v1alpha1
kind: DecoratorController
metadata:
  name: cluster-parent
spec:
  resources:
  - apiVersion: rbac.authorization.k8s.io/v1
    resource: clusterroles
    annotationSelector:
      matchExpressions:
      - {key: default-service-account-binding, operator: Exists}
  attachments:
  - apiVersion: rbac.authorization.k8s.io/v1
    resource: rolebindings
  hooks:
    sync:
      webhook:
        url: http://cluster-parent-controller.metacontroller/sync
`,
	},
}

// MetacontrollerDecorator is the manifest of the example named name.
func MetacontrollerDecorator(name string) string {
	for _, ex := range MetacontrollerDecorators {
		if ex.Name == name {
			return ex.Manifest
		}
	}
	panic("no Metacontroller decorator example " + name)
}
