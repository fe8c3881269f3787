//go:build !linux

package engine

import "runtime"

func kernelName() string {
	switch runtime.GOOS {
	case "darwin":
		return "Darwin"
	case "windows":
		return "Windows_NT"
	}
	return runtime.GOOS
}

func kernelRelease() string { return "" }
