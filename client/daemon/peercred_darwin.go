package daemon

import "golang.org/x/sys/unix"

// socketUID is the effective user ID of the process on the other end of
// a Unix socket, as the kernel recorded it at connect (LOCAL_PEERCRED).
func socketUID(fd uintptr) (uint32, error) {
	cred, err := unix.GetsockoptXucred(int(fd), unix.SOL_LOCAL, unix.LOCAL_PEERCRED)
	if err != nil {
		return 0, err
	}
	return cred.Uid, nil
}
