// Package architecture holds no code: its test reads the module's imports
// and fails on one that docs/architecture.md does not allow, and on a
// package outside internal/ that is importable without being API.
package architecture
