// Package sockbuf enlarges UDP socket buffers. Relayed and tunnelled
// traffic arrives in bursts; the kernel default (about 200 KB, and
// net.core.rmem_max caps plain SO_RCVBUF) overflows and shows up as TCP
// retransmits inside the tunnel. With CAP_NET_ADMIN the FORCE variants
// exceed the cap, as wireguard-go does for its own sockets.
package sockbuf

// Size is the buffer size asked for.
const Size = 7 << 20
