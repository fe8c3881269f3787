//go:build !linux

package sockbuf

// Grow enlarges the receive and send buffers of c as far as the system
// allows (there is no FORCE variant outside Linux); it is best effort.
func Grow(c any) {
	type buffered interface {
		SetReadBuffer(int) error
		SetWriteBuffer(int) error
	}
	if b, ok := c.(buffered); ok {
		_ = b.SetReadBuffer(Size)
		_ = b.SetWriteBuffer(Size)
	}
}
