package daemon

import (
	"context"
	"errors"
	"fmt"
	"net"

	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/peer"
)

// peerCred is who is on the other end of the daemon socket, as the
// kernel says (SO_PEERCRED), for the requests only root may make.
type peerCred struct {
	credentials.CommonAuthInfo
	UID uint32
}

func (peerCred) AuthType() string { return "unix-peercred" }

// peerCredentials is the daemon socket's transport: no bytes exchanged
// (clients dial it with insecure credentials), only the caller's
// credentials read from the socket.
type peerCredentials struct{}

func (peerCredentials) ServerHandshake(c net.Conn) (net.Conn, credentials.AuthInfo, error) {
	uc, ok := c.(*net.UnixConn)
	if !ok {
		return c, nil, nil
	}
	raw, err := uc.SyscallConn()
	if err != nil {
		return nil, nil, fmt.Errorf("daemon socket: %w", err)
	}
	var uid uint32
	var gerr error
	if err := raw.Control(func(fd uintptr) { uid, gerr = socketUID(fd) }); err != nil {
		return nil, nil, fmt.Errorf("daemon socket: %w", err)
	}
	if gerr != nil {
		return nil, nil, fmt.Errorf("daemon socket peer credentials: %w", gerr)
	}
	return c, peerCred{CommonAuthInfo: credentials.CommonAuthInfo{SecurityLevel: credentials.NoSecurity}, UID: uid}, nil
}

func (peerCredentials) ClientHandshake(_ context.Context, _ string, c net.Conn) (net.Conn, credentials.AuthInfo, error) {
	return c, nil, errors.New("peerCredentials is for the daemon's side only")
}

func (peerCredentials) Info() credentials.ProtocolInfo {
	return credentials.ProtocolInfo{SecurityProtocol: "insecure"}
}

func (p peerCredentials) Clone() credentials.TransportCredentials { return p }

func (peerCredentials) OverrideServerName(string) error { return nil }

// errNeedsRoot refuses a setting that opens this machine to the mesh to a
// caller other than root: the socket is group-accessible (0660).
var errNeedsRoot = errors.New("needs root")

// requireRoot refuses the request unless its caller is root by the
// socket's peer credentials; a call that did not come through the socket
// (no credentials) is refused too.
func requireRoot(ctx context.Context, what string) error {
	p, ok := peer.FromContext(ctx)
	if ok {
		if pc, ok := p.AuthInfo.(peerCred); ok && pc.UID == 0 {
			return nil
		}
	}
	return fmt.Errorf("%s %w (run netbird with sudo)", what, errNeedsRoot)
}
