// Package controllerregistry holds what the registries of every kind of
// controller (CompositeController, DecoratorController) share: the
// status, /sync and /preview subresources, the checks of a controller's
// author and of the server's rights as apply-time warnings, the reset
// fields, and the table cells of hooks and conditions. A kind's registry
// declares itself with one Kind and takes the same Options; it keeps only
// its strategy, its table and its names.
package controllerregistry
