//go:build dashboard

package dashboard

import (
	"embed"
	"io/fs"
)

// dist is the production build (npm run build). Building with the
// dashboard tag without it fails here: run `make build`, or
// `cd dashboard && npm ci && npm run build` first.
//
//go:embed all:dist
var dist embed.FS

// Embedded returns the app built into this binary.
func Embedded() fs.FS {
	sub, err := fs.Sub(dist, "dist")
	if err != nil {
		panic(err) // "dist" is a valid path: cannot happen
	}
	return sub
}
