package wg

import "strings"

// tunName maps the requested name to one macOS accepts: utun interfaces
// only ("utun" lets the kernel pick the number); Name reports the result.
func tunName(want string) string {
	if strings.HasPrefix(want, "utun") {
		return want
	}
	return "utun"
}
