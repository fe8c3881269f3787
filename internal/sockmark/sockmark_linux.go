package sockmark

import "golang.org/x/sys/unix"

const supported = true

func setMark(fd uintptr, mark int) error {
	return unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_MARK, mark)
}
