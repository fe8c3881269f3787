// Package natsbus carries signal traffic between signal instances over
// NATS, so peers connected to different instances reach each other. Each
// instance subscribes to one subject per peer whose stream it holds, so a
// message travels only to the instance that needs it; NATS keeps the
// subscriptions across its own reconnects.
package natsbus

import (
	"encoding/base64"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"google.golang.org/protobuf/proto"

	"github.com/wiremesh/wiremesh/internal/key"
	"github.com/wiremesh/wiremesh/proto/signalpb"
	"github.com/wiremesh/wiremesh/signal/server"
)

// Prefix starts every subject this package uses.
const Prefix = "wiremesh.signal."

// Bus is a server.Bus on one NATS connection. All its subscriptions feed
// one channel read by one goroutine, rather than a goroutine per
// subscription (two per connected peer), so 10,000 peers cost 20,000 NATS
// subscriptions but no extra goroutines; handlers must not block.
type Bus struct {
	nc  *nats.Conn
	log *slog.Logger
	ch  chan *nats.Msg

	mu       sync.Mutex
	handlers map[string]*handler // by subject token

	done chan struct{}
	wg   sync.WaitGroup
}

type handler struct{ h server.BusHandler }

// queue is how many messages may wait for the dispatcher before NATS
// drops them (reported as a slow consumer).
const queue = 1 << 16

// Dial connects to the NATS servers in url (comma-separated for a
// cluster). It keeps reconnecting for as long as the Bus is open.
func Dial(url, name string, log *slog.Logger) (*Bus, error) {
	nc, err := nats.Connect(url,
		nats.Name(name),
		nats.MaxReconnects(-1),
		nats.ReconnectWait(500*time.Millisecond),
		nats.ReconnectJitter(250*time.Millisecond, time.Second),
		nats.Timeout(5*time.Second),
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
			log.Warn("NATS disconnected: peers on other signal instances are unreachable until it returns", "err", err)
		}),
		nats.ReconnectHandler(func(c *nats.Conn) { log.Info("NATS reconnected", "server", c.ConnectedUrl()) }),
		nats.ErrorHandler(func(_ *nats.Conn, sub *nats.Subscription, err error) {
			subj := ""
			if sub != nil {
				subj = sub.Subject
			}
			log.Warn("NATS", "subject", subj, "err", err)
		}),
	)
	if err != nil {
		return nil, fmt.Errorf("connect to NATS at %s: %w", url, err)
	}
	b := &Bus{nc: nc, log: log, ch: make(chan *nats.Msg, queue), handlers: map[string]*handler{}, done: make(chan struct{})}
	b.wg.Add(1)
	go func() { defer b.wg.Done(); b.dispatch() }()
	return b, nil
}

func (b *Bus) dispatch() {
	for {
		select {
		case <-b.done:
			return
		case m := <-b.ch:
			b.handle(m)
		}
	}
}

func (b *Bus) handle(m *nats.Msg) {
	rest, ok := strings.CutPrefix(m.Subject, Prefix)
	if !ok || len(rest) < 2 || rest[1] != '.' {
		return
	}
	b.mu.Lock()
	h := b.handlers[rest[2:]]
	b.mu.Unlock()
	if h == nil {
		return // unsubscribed meanwhile
	}
	switch rest[0] {
	case 'm':
		var msg signalpb.EncryptedMessage
		if err := proto.Unmarshal(m.Data, &msg); err != nil {
			b.log.Warn("NATS: undecodable signal message dropped", "err", err)
			return
		}
		h.h.Message(&msg)
	case 'c':
		if c, ok := server.ParseClaim(m.Data); ok {
			h.h.Claimed(c)
		}
	}
}

// Close drains nothing: signal messages are ephemeral.
func (b *Bus) Close() {
	b.nc.Close()
	close(b.done)
	b.wg.Wait()
}

// token turns a WireGuard public key (standard base64, with + / =) into a
// subject token.
func token(peer string) (string, error) {
	k, err := key.ParsePublic(peer)
	if err != nil {
		return "", fmt.Errorf("peer key: %w", err)
	}
	return base64.RawURLEncoding.EncodeToString(k[:]), nil
}

func msgSubject(tok string) string   { return Prefix + "m." + tok }
func claimSubject(tok string) string { return Prefix + "c." + tok }

// Publish implements server.Bus.
func (b *Bus) Publish(msg *signalpb.EncryptedMessage) error {
	tok, err := token(msg.GetRemoteKey())
	if err != nil {
		return err
	}
	data, err := proto.Marshal(msg)
	if err != nil {
		return err
	}
	return b.nc.Publish(msgSubject(tok), data)
}

// Claim implements server.Bus.
func (b *Bus) Claim(peer string, c server.Claim) error {
	tok, err := token(peer)
	if err != nil {
		return err
	}
	return b.nc.Publish(claimSubject(tok), c.Bytes())
}

// Subscribe implements server.Bus. It returns once the NATS server knows
// the subscriptions, so a claim published next reaches instances that
// subscribed before.
func (b *Bus) Subscribe(peer string, h server.BusHandler) (func(), error) {
	tok, err := token(peer)
	if err != nil {
		return nil, err
	}
	h2 := &handler{h: h}
	b.mu.Lock()
	b.handlers[tok] = h2
	b.mu.Unlock()
	forget := func() {
		b.mu.Lock()
		if b.handlers[tok] == h2 {
			delete(b.handlers, tok)
		}
		b.mu.Unlock()
	}
	ms, err := b.nc.ChanSubscribe(msgSubject(tok), b.ch)
	if err != nil {
		forget()
		return nil, fmt.Errorf("subscribe: %w", err)
	}
	cs, err := b.nc.ChanSubscribe(claimSubject(tok), b.ch)
	if err != nil {
		_ = ms.Unsubscribe()
		forget()
		return nil, fmt.Errorf("subscribe: %w", err)
	}
	if err := b.nc.FlushTimeout(5 * time.Second); err != nil {
		b.log.Warn("NATS flush after subscribe", "err", err)
	}
	return func() { _ = ms.Unsubscribe(); _ = cs.Unsubscribe(); forget() }, nil
}
