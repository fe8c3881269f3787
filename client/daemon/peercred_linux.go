package daemon

import "golang.org/x/sys/unix"

// socketUID is the user ID of the process on the other end of a Unix
// socket, as the kernel recorded it at connect (SO_PEERCRED).
func socketUID(fd uintptr) (uint32, error) {
	cred, err := unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	if err != nil {
		return 0, err
	}
	return cred.Uid, nil
}
