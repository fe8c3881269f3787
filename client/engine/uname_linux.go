package engine

import "golang.org/x/sys/unix"

func kernelName() string {
	var u unix.Utsname
	if unix.Uname(&u) != nil {
		return "Linux"
	}
	return unix.ByteSliceToString(u.Sysname[:])
}

func kernelRelease() string {
	var u unix.Utsname
	if unix.Uname(&u) != nil {
		return ""
	}
	return unix.ByteSliceToString(u.Release[:])
}
