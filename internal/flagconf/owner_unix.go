//go:build unix

package flagconf

import (
	"os"
	"syscall"
)

// fileOwner is the uid owning the file fi describes.
func fileOwner(fi os.FileInfo) (int, bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, false
	}
	return int(st.Uid), true
}

// modesMeaningful: permission bits say who may read and write a file.
const modesMeaningful = true
