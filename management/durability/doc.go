// Package durability holds the store's crash tests: real management
// processes killed with SIGKILL in the middle of registrations, on both
// engines, and a database restarted under a running server. It has no
// non-test code.
package durability
