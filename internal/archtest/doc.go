// Package archtest holds tests of the repository's structure: dependency
// rules between the top-level components and a doc comment on every
// package. It has no code of its own.
package archtest
