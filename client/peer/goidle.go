package peer

import (
	"bytes"
	"context"
	"fmt"

	"github.com/wiremesh/wiremesh/proto/signalpb"
)

// GoIdle tells the remote, through signal, that this side is going away
// (NetBird's GO_IDLE), with the session id of our latest offer or answer:
// our agents drop the connection at once when it names the session they
// know (see onGoIdle); NetBird's clients act on it only with lazy
// connections, and then deactivate the connection, which suits a peer
// that is leaving. It may be called after Close.
func (c *Conn) GoIdle(ctx context.Context) error {
	c.mu.Lock()
	id := c.sentSession
	c.mu.Unlock()
	if err := c.sig.Send(ctx, c.cfg.Remote, &signalpb.Body{Type: signalpb.Body_GO_IDLE, SessionId: id}); err != nil {
		return fmt.Errorf("send GO_IDLE to %s: %w", c.cfg.Remote, err)
	}
	return nil
}

// maxRetired bounds the remote's ended sessions remembered (retired).
const maxRetired = 8

// noteRemoteSession records the session id of an offer or answer from the
// remote. An id that a GO_IDLE already ended is not taken back: a replayed
// offer must not re-arm a replayed GO_IDLE.
func (c *Conn) noteRemoteSession(id []byte) {
	if len(id) == 0 {
		return
	}
	for _, r := range c.retired {
		if bytes.Equal(r, id) {
			return
		}
	}
	c.remoteSession = bytes.Clone(id)
}

// onGoIdle handles a GO_IDLE from the remote and reports whether it
// proved that the remote left. Only our own agents' GO_IDLE can: it
// carries the session id of the remote's latest offer or answer, which
// the signal server cannot make up, and acting on it retires that id, so
// replaying the message later does nothing. Then the remote's paths are
// dead now, not after ICE's timeouts: s (the loop's session, may be nil)
// and the relayed path are closed and the peer is marked as left; the
// caller starts over as for a peer that has not come up yet, and the
// remote's next offer reconnects. Any other GO_IDLE (no session id:
// NetBird's clients; or a stale one: a replay by the signal server) is
// only a hint: the caller probes the peer (OnIdleHint) and the
// connection stays as it is.
func (c *Conn) onGoIdle(b *signalpb.Body, s *session) bool {
	id := b.GetSessionId()
	if len(id) == 0 || len(c.remoteSession) == 0 || !bytes.Equal(id, c.remoteSession) {
		c.log.Debug("GO_IDLE without the remote's current session; probing the peer",
			"session", fmt.Sprintf("%x", id), "current", fmt.Sprintf("%x", c.remoteSession))
		if c.cfg.OnIdleHint != nil {
			c.cfg.OnIdleHint()
		}
		return false
	}
	c.log.Info("remote peer went away (GO_IDLE)")
	c.retired = append(c.retired, c.remoteSession)
	if len(c.retired) > maxRetired {
		c.retired = c.retired[len(c.retired)-maxRetired:]
	}
	c.remoteSession = nil
	c.closeSession(s)
	c.onICE = false
	c.closeRelay(&c.rl)
	c.rl.gen++ // a relay path still opening is stale too
	c.rl.opening, c.rl.adopted = false, false
	c.scheduleRelay(&c.rl, c.rl.backoff)
	c.setStatus(func(st *Status) { *st = Status{State: "Connecting", Since: st.Since, Left: true} })
	if c.cfg.OnLeft != nil {
		c.cfg.OnLeft()
	}
	return true
}
