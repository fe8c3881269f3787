//go:build !unix

package flagconf

import "os"

// fileOwner: no uids here; ownership is not checked.
func fileOwner(os.FileInfo) (int, bool) { return 0, false }

// modesMeaningful: Windows has ACLs, which Go's mode bits do not show.
const modesMeaningful = false
