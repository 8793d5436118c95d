package framework

// EarliestShapeController is the CompositeController of the hook contract
// this project was founded on, in Metacontroller's earliest shape, verbatim:
// several resources in one childResources entry, the hooks' Service in
// spec.clientConfig, the sync hook as a path on it.
const EarliestShapeController = `apiVersion: metacontroller.k8s.io/v1alpha1
kind: CompositeController
metadata:
  name: catset-controller
spec:
  parentResource: {apiVersion: ctl.enisoc.com/v1, resource: catsets}
  childResources:
    - apiVersion: v1
      resources: ["pods", "persistentvolumeclaims"]
  clientConfig:
    service: {name: catset-controller, namespace: metacontroller}
  hooks:
    sync: {path: /sync}
`

// EarliestShapeStoredSpec is EarliestShapeController's spec in today's
// shape, as the server stores it, shows it and sends it to the hook.
const EarliestShapeStoredSpec = `
parentResource: {apiVersion: ctl.enisoc.com/v1, resource: catsets}
childResources:
- apiVersion: v1
  resource: pods
  updateStrategy: {method: OnDelete, statusChecks: {}}
- apiVersion: v1
  resource: persistentvolumeclaims
  updateStrategy: {method: OnDelete, statusChecks: {}}
hooks:
  sync:
    version: v1
    webhook:
      service: {name: catset-controller, namespace: metacontroller, port: 80, protocol: http}
      path: /sync
`

// EarliestShapeWarnings are the warnings the server answers for
// EarliestShapeController, one per conversion: the field, then a part of
// its message.
var EarliestShapeWarnings = []struct{ Field, Text string }{
	{"spec.childResources[0].resources", "converted into one spec.childResources entry per resource: {apiVersion: v1, resource: pods}, {apiVersion: v1, resource: persistentvolumeclaims}"},
	{"spec.clientConfig", "converted into the webhook.service of spec.hooks.sync"},
	{"spec.hooks.sync.path", `converted into spec.hooks.sync.webhook.path "/sync" on spec.hooks.sync.webhook.service metacontroller/catset-controller`},
}
