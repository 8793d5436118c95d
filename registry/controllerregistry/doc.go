// Package controllerregistry holds what the registries of the two kinds
// of controller (CompositeController, DecoratorController) share: the
// status subresource, the checks of a controller's author and of the
// server's rights as apply-time warnings, the reset fields, and the
// table cells of hooks and conditions. Each kind's registry keeps only
// what differs.
package controllerregistry
