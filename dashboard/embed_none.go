//go:build !dashboard

package dashboard

import "io/fs"

// Embedded returns nil: this binary was built without the dashboard tag,
// and serves a page saying how to build the app into it.
func Embedded() fs.FS { return nil }
