package relayclient

import (
	"context"
	"crypto/tls"
	"errors"
	"log/slog"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/wiremesh/wiremesh/internal/relaywire"
)

// State is one relay as `netbird status` shows it.
type State struct {
	URI       string
	Available bool
	Err       string
}

// Manager keeps the home relay connected (the first of management's
// relays to answer), reconnects it with backoff, and holds connections to
// other peers' home relays while they carry peer connections.
type Manager struct {
	pub string
	log *slog.Logger
	tls *tls.Config

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	kick   chan struct{}

	mu      sync.Mutex
	urls    []string
	cred    relaywire.Credentials
	home    *Client
	homeErr error
	foreign map[string]*Client
}

// NewManager returns a manager for the agent with WireGuard key pub. It
// does nothing until Update gives it relays.
func NewManager(pub string, tlsConf *tls.Config, log *slog.Logger) *Manager {
	ctx, cancel := context.WithCancel(context.Background())
	m := &Manager{pub: pub, log: log, tls: tlsConf, ctx: ctx, cancel: cancel, kick: make(chan struct{}, 1), foreign: map[string]*Client{}}
	m.wg.Add(2)
	go func() { defer m.wg.Done(); m.keepHome() }()
	go func() { defer m.wg.Done(); m.pruneForeign() }()
	return m
}

// Update applies the relays and token of a NetbirdConfig. Empty urls
// means no relays: the home connection is closed.
func (m *Manager) Update(urls []string, cred relaywire.Credentials) {
	m.mu.Lock()
	changed := !slices.Equal(urls, m.urls)
	m.urls, m.cred = slices.Clone(urls), cred
	var drop *Client
	if changed && m.home != nil && !slices.Contains(urls, m.home.url) {
		drop, m.home = m.home, nil
	}
	m.mu.Unlock()
	if drop != nil {
		drop.Close()
	}
	select {
	case m.kick <- struct{}{}:
	default:
	}
}

// HomeURL is the home relay's instance URL ("" while there is none).
func (m *Manager) HomeURL() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.home == nil {
		return ""
	}
	return m.home.InstanceURL()
}

// Enabled reports whether management configured relays.
func (m *Manager) Enabled() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.urls) > 0
}

// States lists the configured relays for status.
func (m *Manager) States() []State {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []State
	for _, u := range m.urls {
		st := State{URI: u}
		if m.home != nil && m.home.url == u {
			st.Available = true
		} else if m.homeErr != nil {
			st.Err = m.homeErr.Error()
		}
		out = append(out, st)
	}
	return out
}

// Open opens a packet connection to the peer with key remote on the relay
// named by url: the home relay when url is "" or its instance URL,
// otherwise that other relay, dialed (and kept while it carries peers).
func (m *Manager) Open(ctx context.Context, url, remote string) (*PeerConn, error) {
	c, err := m.client(ctx, url)
	if err != nil {
		return nil, err
	}
	pc, err := c.OpenConn(ctx, remote)
	if errors.Is(err, ErrExists) {
		// A stale conn from an earlier attempt: replace it.
		c.mu.Lock()
		old := c.conns[relaywire.HashID(remote)]
		c.mu.Unlock()
		if old != nil {
			old.Close()
		}
		pc, err = c.OpenConn(ctx, remote)
	}
	return pc, err
}

func (m *Manager) client(ctx context.Context, url string) (*Client, error) {
	m.mu.Lock()
	home, cred := m.home, m.cred
	if url == "" || (home != nil && url == home.InstanceURL()) {
		m.mu.Unlock()
		if home == nil {
			return nil, errors.New("no home relay connected")
		}
		return home, nil
	}
	if c := m.foreign[url]; c != nil && c.Err() == nil {
		m.mu.Unlock()
		return c, nil
	}
	m.mu.Unlock()
	c, err := Dial(ctx, url, m.pub, cred, m.tls, m.log)
	if err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if old := m.foreign[url]; old != nil && old.Err() == nil {
		go c.Close()
		return old, nil
	}
	m.foreign[url] = c
	return c, nil
}

// Close ends every relay connection.
func (m *Manager) Close() {
	m.cancel()
	m.wg.Wait()
	m.mu.Lock()
	cs := []*Client{m.home}
	m.home = nil
	for _, c := range m.foreign {
		cs = append(cs, c)
	}
	m.foreign = map[string]*Client{}
	m.mu.Unlock()
	for _, c := range cs {
		if c != nil {
			c.Close()
		}
	}
}

// keepHome connects the home relay: all configured relays are dialed at
// once and the first to authenticate wins. After a loss it retries at once,
// then with exponential backoff (2 s doubling to 60 s, jittered).
func (m *Manager) keepHome() {
	backoff := 2 * time.Second
	for {
		m.mu.Lock()
		home, urls, cred := m.home, m.urls, m.cred
		m.mu.Unlock()
		var lost <-chan struct{}
		if home != nil {
			lost = home.Done()
		}
		if home == nil && len(urls) > 0 {
			c, err := m.dialFirst(urls, cred)
			m.mu.Lock()
			m.homeErr = err
			if err == nil && slices.Equal(urls, m.urls) {
				m.home = c
				backoff = 2 * time.Second
				m.mu.Unlock()
				m.log.Info("home relay connected", "relay", c.InstanceURL())
				continue
			}
			m.mu.Unlock()
			if c != nil {
				c.Close()
			}
			if err != nil {
				m.log.Warn("no relay reachable", "err", err, "retry_in", backoff)
			}
			wait := time.Duration(float64(backoff) * (0.5 + rand.Float64()))
			backoff = min(backoff*2, 60*time.Second)
			select {
			case <-m.ctx.Done():
				return
			case <-m.kick:
			case <-time.After(wait):
			}
			continue
		}
		select {
		case <-m.ctx.Done():
			return
		case <-m.kick:
		case <-lost:
			m.log.Warn("home relay lost, reconnecting", "err", home.Err())
			m.mu.Lock()
			if m.home == home {
				m.home = nil
			}
			m.mu.Unlock()
			time.Sleep(200 * time.Millisecond) // let the network settle
		}
	}
}

func (m *Manager) dialFirst(urls []string, cred relaywire.Credentials) (*Client, error) {
	ctx, cancel := context.WithTimeout(m.ctx, 30*time.Second)
	defer cancel()
	type res struct {
		c   *Client
		err error
	}
	out := make(chan res, len(urls))
	for _, u := range urls {
		go func() {
			c, err := Dial(ctx, u, m.pub, cred, m.tls, m.log)
			out <- res{c, err}
		}()
	}
	var win *Client
	var errs []error
	for range urls {
		r := <-out
		switch {
		case r.err != nil:
			errs = append(errs, r.err)
		case win == nil:
			win = r.c
			cancel() // the others lose
		default:
			go r.c.Close()
		}
	}
	if win != nil {
		return win, nil
	}
	return nil, errors.Join(errs...)
}

// pruneForeign closes other relays' connections that carry no peers.
func (m *Manager) pruneForeign() {
	t := time.NewTicker(60 * time.Second)
	defer t.Stop()
	for {
		select {
		case <-m.ctx.Done():
			return
		case <-t.C:
		}
		m.mu.Lock()
		var idle []*Client
		for u, c := range m.foreign {
			if c.Err() != nil || c.Conns() == 0 {
				idle = append(idle, c)
				delete(m.foreign, u)
			}
		}
		m.mu.Unlock()
		for _, c := range idle {
			c.Close()
		}
	}
}
