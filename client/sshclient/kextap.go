package sshclient

import (
	"bytes"
	"encoding/binary"

	"golang.org/x/crypto/ssh"
)

// KexTap reads the server's side of an SSH connection that some other
// client runs (OpenSSH through `netbird ssh proxy`) for the host key the
// server presents: the key exchange is in the clear until the first
// NEWKEYS, and the server's key exchange reply starts with its host key
// (RFC 4253 §8, RFC 5656 §4, RFC 8731; RFC 4419 §3 for group exchange,
// whose reply is message 33). The bytes are the server's, so hostile:
// the tap never errors or blocks the stream, reads at most maxTapped
// bytes and stops at the first host key, NEWKEYS or anything it cannot
// parse.
type KexTap struct {
	// HostKey is called with the first host key the server presents,
	// before the bytes carrying it go on to the client; the tap stops
	// there (a normal exchange carries one, and a hostile server could
	// send many replies before NEWKEYS to flood the callback).
	HostKey func(ssh.PublicKey)

	buf     []byte
	off     int    // parsed up to here
	version []byte // the server's version line, once read
	done    bool
	total   int
}

const (
	maxTapped    = 256 << 10
	maxPacket    = 35000 // RFC 4253 §6.1
	maxLineBytes = 255   // RFC 4253 §4.2
	maxLines     = 64    // lines before the version line we skip
	msgNewKeys   = 21
	msgKexReply  = 31 // KEXDH_REPLY, KEX_ECDH_REPLY, hybrid replies; KEX_DH_GEX_GROUP
	msgGexReply  = 33
)

// Write takes the next bytes the server sent; it always takes them all.
func (k *KexTap) Write(p []byte) (int, error) {
	if k.done {
		return len(p), nil
	}
	k.total += len(p)
	if k.total > maxTapped {
		k.stop()
		return len(p), nil
	}
	k.buf = append(k.buf, p...)
	k.parse()
	return len(p), nil
}

// Done reports whether the tap has stopped reading (a host key or
// NEWKEYS seen, or something it does not understand).
func (k *KexTap) Done() bool { return k.done }

// ServerVersion is the server's identification line (without CR LF; ""
// until read). The server's bytes, at most maxLineBytes: see MeshServer
// and PrintableVersion.
func (k *KexTap) ServerVersion() string { return string(k.version) }

func (k *KexTap) stop() { k.done, k.buf = true, nil }

func (k *KexTap) parse() {
	lines := 0
	for !k.done && k.version == nil {
		rest := k.buf[k.off:]
		i := bytes.IndexByte(rest, '\n')
		if i < 0 {
			if len(rest) > maxLineBytes {
				k.stop()
			}
			return
		}
		if i > maxLineBytes || lines > maxLines {
			k.stop()
			return
		}
		line := rest[:i]
		k.off += i + 1
		lines++
		if len(line) >= 4 && string(line[:4]) == "SSH-" {
			k.version = bytes.Clone(bytes.TrimSuffix(line, []byte("\r")))
		}
	}
	for !k.done {
		rest := k.buf[k.off:]
		if len(rest) < 5 {
			return
		}
		n := binary.BigEndian.Uint32(rest)
		if n < 5 || n > maxPacket {
			k.stop()
			return
		}
		if len(rest) < 4+int(n) {
			return
		}
		pad := int(rest[4])
		if pad >= int(n) {
			k.stop()
			return
		}
		payload := rest[5 : 4+int(n)-pad]
		k.off += 4 + int(n)
		if len(payload) == 0 {
			k.stop()
			return
		}
		switch payload[0] {
		case msgNewKeys:
			k.stop()
			return
		case msgKexReply, msgGexReply:
			// A group-exchange group (also 31) starts with the prime:
			// no key parses from it.
			if blob, ok := sshString(payload[1:]); ok {
				if pk, err := ssh.ParsePublicKey(blob); err == nil {
					k.stop()
					if k.HostKey != nil {
						k.HostKey(pk)
					}
					return
				}
			}
		}
	}
}

// sshString is the RFC 4251 string at the start of b.
func sshString(b []byte) ([]byte, bool) {
	if len(b) < 4 {
		return nil, false
	}
	n := binary.BigEndian.Uint32(b)
	if uint64(n) > uint64(len(b)-4) {
		return nil, false
	}
	return b[4 : 4+n], true
}
