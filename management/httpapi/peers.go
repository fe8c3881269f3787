package httpapi

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"slices"
	"time"

	"github.com/wiremesh/wiremesh/management/account"
	"github.com/wiremesh/wiremesh/management/auth"
	"github.com/wiremesh/wiremesh/management/peers"
	"github.com/wiremesh/wiremesh/management/store"
	"github.com/wiremesh/wiremesh/management/users"
)

var errBadRequest = errors.New("bad request")

func errBadQuery(name, value string) error {
	return fmt.Errorf("%w: bad value %q for %s", errBadRequest, value, name)
}

type groupMinimum struct {
	ID         string `json:"id"`
	Name       string `json:"name"`
	PeersCount int    `json:"peers_count"`
	// ResourcesCount counts network resources, which this server does not
	// have yet: always 0.
	ResourcesCount int `json:"resources_count"`
}

type peerJSON struct {
	ID                          string         `json:"id"`
	Name                        string         `json:"name"`
	CreatedAt                   string         `json:"created_at"`
	IP                          string         `json:"ip"`
	IPv6                        string         `json:"ipv6,omitempty"` // none: the peer has no IPv6 overlay address
	ConnectionIP                string         `json:"connection_ip"`
	Connected                   bool           `json:"connected"`
	LastSeen                    string         `json:"last_seen"`
	OS                          string         `json:"os"`
	KernelVersion               string         `json:"kernel_version"`
	GeonameID                   int            `json:"geoname_id"`
	Version                     string         `json:"version"`
	UIVersion                   string         `json:"ui_version"`
	Groups                      []groupMinimum `json:"groups"`
	SSHEnabled                  bool           `json:"ssh_enabled"`
	UserID                      string         `json:"user_id"`
	Hostname                    string         `json:"hostname"`
	DNSLabel                    string         `json:"dns_label"`
	LoginExpirationEnabled      bool           `json:"login_expiration_enabled"`
	LoginExpired                bool           `json:"login_expired"`
	LastLogin                   string         `json:"last_login"`
	InactivityExpirationEnabled bool           `json:"inactivity_expiration_enabled"`
	ApprovalRequired            bool           `json:"approval_required"`
	CountryCode                 string         `json:"country_code"`
	CityName                    string         `json:"city_name"`
	SerialNumber                string         `json:"serial_number"`
	ExtraDNSLabels              []string       `json:"extra_dns_labels"`
	Ephemeral                   bool           `json:"ephemeral"`
	LocalFlags                  localFlagsJSON `json:"local_flags"`
	AccessiblePeersCount        *int           `json:"accessible_peers_count,omitempty"`
	// Our extension (docs/extensions.md): how the peer's connections go,
	// as our agent reports them; absent for peers that report nothing
	// (official clients, offline peers). The list is on GET /api/peers/{id}.
	Connections     *connCounts    `json:"connections,omitempty"`
	PeerConnections []peerConnJSON `json:"peer_connections,omitempty"`
}

// localFlagsJSON is SPEC-rest's PeerLocalFlags: what the peer's agent
// reports of its local settings.
type localFlagsJSON struct {
	RosenpassEnabled      bool `json:"rosenpass_enabled"`
	RosenpassPermissive   bool `json:"rosenpass_permissive"`
	ServerSSHAllowed      bool `json:"server_ssh_allowed"`
	DisableClientRoutes   bool `json:"disable_client_routes"`
	DisableServerRoutes   bool `json:"disable_server_routes"`
	DisableDNS            bool `json:"disable_dns"`
	DisableFirewall       bool `json:"disable_firewall"`
	BlockLANAccess        bool `json:"block_lan_access"`
	BlockInbound          bool `json:"block_inbound"`
	LazyConnectionEnabled bool `json:"lazy_connection_enabled"`
}

// ipv6Text is a peer's IPv6 overlay address, "" (omitted) for none.
func ipv6Text(a netip.Addr) string {
	if !a.IsValid() {
		return ""
	}
	return a.String()
}

// toLocalFlags converts a peer's flags to PeerLocalFlags, which has no
// disable_ipv6 (the peer's ipv6 field shows its effect instead).
func toLocalFlags(f account.LocalFlags) localFlagsJSON {
	return localFlagsJSON{RosenpassEnabled: f.RosenpassEnabled, RosenpassPermissive: f.RosenpassPermissive,
		ServerSSHAllowed: f.ServerSSHAllowed, DisableClientRoutes: f.DisableClientRoutes, DisableServerRoutes: f.DisableServerRoutes,
		DisableDNS: f.DisableDNS, DisableFirewall: f.DisableFirewall, BlockLANAccess: f.BlockLANAccess,
		BlockInbound: f.BlockInbound, LazyConnectionEnabled: f.LazyConnectionEnabled}
}

// peerView is what the peer endpoints read of an account.
type peerView struct {
	acc    account.Account
	peers  []account.Peer
	groups []account.Group
	// ids are the peers the caller may see (those counted in groups).
	ids []account.PeerID
	// Derived once per view by index, since toPeer runs for every listed
	// peer: the groups each peer is in (indexes into groups, ascending),
	// the All groups, and each group's count of visible members.
	of     map[account.PeerID][]int
	all    []int
	counts []int
}

// readView reads the account, its groups and the peers the caller may
// see: all for an admin, its own for a user.
func readView(ctx context.Context, at *store.AccountTx, caller account.User) (peerView, error) {
	var v peerView
	var err error
	if v.acc, err = at.Account(ctx); err != nil {
		return v, err
	}
	if v.groups, err = at.Groups(ctx); err != nil {
		return v, err
	}
	if seesAll(caller, auth.Peers) {
		v.peers, err = at.Peers(ctx)
	} else {
		v.peers, err = at.UserPeers(ctx, caller.ID)
	}
	v.ids = make([]account.PeerID, len(v.peers))
	for i, p := range v.peers {
		v.ids[i] = p.ID
	}
	return v, err
}

// index derives the view's group memberships and counts in one pass over
// the groups' members.
func (v *peerView) index() {
	seen := make(map[account.PeerID]bool, len(v.ids))
	for _, id := range v.ids {
		seen[id] = true
	}
	v.of = make(map[account.PeerID][]int, len(v.ids))
	v.all, v.counts = nil, make([]int, len(v.groups))
	for i, g := range v.groups {
		if g.All {
			v.all = append(v.all, i)
			v.counts[i] = len(v.ids)
			continue
		}
		for _, m := range g.Peers {
			if seen[m] {
				v.counts[i]++
			}
			if ids := v.of[m]; len(ids) == 0 || ids[len(ids)-1] != i {
				v.of[m] = append(ids, i)
			}
		}
	}
}

// toPeer converts a peer; its groups' peers_count counts only the peers
// the caller may see (a regular user learns nothing of others' peers).
func (v peerView) toPeer(p account.Peer, now time.Time) peerJSON {
	in := v.of[p.ID]
	if len(v.all) > 0 {
		in = append(slices.Clone(v.all), in...)
		slices.Sort(in)
	}
	groups := make([]groupMinimum, 0, len(in))
	for _, i := range in {
		g := v.groups[i]
		groups = append(groups, groupMinimum{ID: string(g.ID), Name: g.Name, PeersCount: v.counts[i]})
	}
	os := p.Meta.OS
	if p.Meta.OSVersion != "" {
		os += " " + p.Meta.OSVersion
	}
	return peerJSON{ID: string(p.ID), Name: p.Name, CreatedAt: ts(p.CreatedAt), IP: p.IP.String(), IPv6: ipv6Text(p.IPv6), Connected: p.Connected, LastSeen: ts(p.LastSeen),
		OS: os, KernelVersion: p.Meta.KernelVersion, Version: p.Meta.NetbirdVersion, UIVersion: p.Meta.UIVersion, Groups: groups,
		UserID: string(p.UserID), Hostname: p.Meta.Hostname, DNSLabel: p.FQDN(v.acc.Domain), LoginExpirationEnabled: p.LoginExpirationEnabled, SSHEnabled: p.SSHEnabled,
		LoginExpired: v.acc.Settings.Expired(p, now), LastLogin: ts(p.LastLogin), SerialNumber: p.Meta.SerialNumber,
		ExtraDNSLabels: []string{}, Ephemeral: p.Ephemeral, ApprovalRequired: p.ApprovalRequired,
		LocalFlags: toLocalFlags(p.Meta.Flags)}
}

// listPeers lists the peers the caller may see: all from the cached list
// (listAllPeers), or a regular user's own, read once for the list and
// the counts of accessible peers (cached per network serial: see
// reachCache).
func (a *API) listPeers(w http.ResponseWriter, r *http.Request, caller account.User) error {
	if seesAll(caller, auth.Peers) {
		return a.listAllPeers(w, r, caller.AccountID)
	}
	ctx := r.Context()
	now := time.Now()
	var (
		v      peerView
		counts map[account.PeerID]int
	)
	err := a.o.Store.Read(ctx, func(tx *store.Tx) error {
		at := tx.In(caller.AccountID)
		var err error
		if v, err = readView(ctx, at, caller); err != nil {
			return err
		}
		counts, err = a.reachCounts(ctx, at, reachSource{acc: v.acc, groups: v.groups, haveGroups: true}, now)
		return err
	})
	if err != nil {
		return err
	}
	v.index()
	name, ip := r.URL.Query().Get("name"), r.URL.Query().Get("ip")
	out := make([]peerJSON, 0, len(v.peers))
	for _, p := range v.peers {
		if (name != "" && p.Name != name) || (ip != "" && p.IP.String() != ip && ipv6Text(p.IPv6) != ip) {
			continue
		}
		j := v.toPeer(p, now)
		n := counts[p.ID]
		j.AccessiblePeersCount = &n
		j.Connections, _ = a.connsOf(caller.AccountID, p.ID, false)
		out = append(out, j)
	}
	return writePeers(w, out)
}

// peer finds one peer the caller may see, with the groups it is in and
// their counts of peers the caller may see (read narrowly: IDs only).
func (a *API) peer(ctx context.Context, caller account.User, id account.PeerID) (peerView, account.Peer, error) {
	var (
		v peerView
		p account.Peer
	)
	err := a.o.Store.Read(ctx, func(tx *store.Tx) error {
		at := tx.In(caller.AccountID)
		var err error
		if p, err = at.Peer(ctx, id); errors.Is(err, store.ErrNotFound) {
			return users.ErrNotFound
		} else if err != nil {
			return err
		}
		if !seesAll(caller, auth.Peers) && p.UserID != caller.ID {
			return users.ErrNotFound
		}
		if v.acc, err = at.Account(ctx); err != nil {
			return err
		}
		if v.groups, err = at.Groups(ctx); err != nil {
			return err
		}
		if !seesAll(caller, auth.Peers) {
			own, err := at.UserPeers(ctx, caller.ID)
			for _, o := range own {
				v.ids = append(v.ids, o.ID)
			}
			return err
		}
		names, err := at.PeerNames(ctx)
		for _, n := range names {
			v.ids = append(v.ids, n.ID)
		}
		return err
	})
	if err != nil {
		return v, account.Peer{}, err
	}
	v.peers = []account.Peer{p}
	v.index()
	return v, p, nil
}

func (a *API) getPeer(w http.ResponseWriter, r *http.Request, caller account.User) error {
	if seesAll(caller, auth.Peers) {
		if served, err := a.cachedPeer(w, r, caller.AccountID, account.PeerID(r.PathValue("peerId"))); served || err != nil {
			return err
		}
	}
	v, p, err := a.peer(r.Context(), caller, account.PeerID(r.PathValue("peerId")))
	if err != nil {
		return err
	}
	j := v.toPeer(p, time.Now())
	j.Connections, j.PeerConnections = a.connsOf(caller.AccountID, p.ID, true)
	return ok(w, j)
}

func (a *API) updatePeer(w http.ResponseWriter, r *http.Request, caller account.User) error {
	var req struct {
		Name string `json:"name"`
		// SSHEnabled nil (absent) leaves the peer's SSH switch as it is.
		SSHEnabled             *bool `json:"ssh_enabled"`
		LoginExpirationEnabled bool  `json:"login_expiration_enabled"`
		// ApprovalRequired false approves a pending peer (admins only).
		ApprovalRequired *bool `json:"approval_required"`
		// IPv6 nil (absent) leaves the peer's IPv6 overlay address.
		IPv6 *string `json:"ipv6"`
	}
	if err := decode(r, &req); err != nil {
		return err
	}
	id := account.PeerID(r.PathValue("peerId"))
	_, cur, err := a.peer(r.Context(), caller, id)
	if err != nil {
		return err
	}
	if auth.Can(caller, auth.Peers, auth.Update) != auth.All && req.LoginExpirationEnabled != cur.LoginExpirationEnabled {
		return fmt.Errorf("%w: only admins change a peer's login expiration", users.ErrForbidden)
	}
	if auth.Can(caller, auth.Peers, auth.Update) != auth.All && req.ApprovalRequired != nil && *req.ApprovalRequired != cur.ApprovalRequired {
		return fmt.Errorf("%w: only admins approve peers", users.ErrForbidden)
	}
	if auth.Can(caller, auth.Peers, auth.Update) != auth.All && req.SSHEnabled != nil && *req.SSHEnabled != cur.SSHEnabled {
		return fmt.Errorf("%w: only admins switch a peer's SSH server (ssh_enabled)", users.ErrForbidden)
	}
	in := peers.UpdateInput{Name: req.Name, LoginExpiration: req.LoginExpirationEnabled, ApprovalRequired: req.ApprovalRequired, SSHEnabled: req.SSHEnabled}
	if req.IPv6 != nil {
		ip, err := netip.ParseAddr(*req.IPv6)
		if err != nil || !ip.Is6() || ip.Is4In6() || ip.Zone() != "" {
			return fmt.Errorf("%w: ipv6 %q is not an IPv6 address", users.ErrInvalid, *req.IPv6)
		}
		if ip != cur.IPv6 && auth.Can(caller, auth.Peers, auth.Update) != auth.All {
			return fmt.Errorf("%w: only admins change a peer's ipv6", users.ErrForbidden)
		}
		in.IPv6 = &ip
	}
	if _, err := a.o.Peers.Update(r.Context(), caller.AccountID, id, in, string(caller.ID)); err != nil {
		return err
	}
	v, p, err := a.peer(r.Context(), caller, id)
	if err != nil {
		return err
	}
	// The same peer as GET /api/peers/{id} shows it, connections included.
	j := v.toPeer(p, time.Now())
	j.Connections, j.PeerConnections = a.connsOf(caller.AccountID, p.ID, true)
	return ok(w, j)
}

func (a *API) deletePeer(w http.ResponseWriter, r *http.Request, caller account.User) error {
	id := account.PeerID(r.PathValue("peerId"))
	if _, _, err := a.peer(r.Context(), caller, id); err != nil {
		return err
	}
	if err := a.o.Peers.Delete(r.Context(), caller.AccountID, id, string(caller.ID)); err != nil {
		return err
	}
	return ok(w, struct{}{})
}

// --- events ---

type eventJSON struct {
	ID             string            `json:"id"`
	Timestamp      string            `json:"timestamp"`
	Activity       string            `json:"activity"`
	ActivityCode   string            `json:"activity_code"`
	InitiatorID    string            `json:"initiator_id"`
	InitiatorName  string            `json:"initiator_name"`
	InitiatorEmail string            `json:"initiator_email"`
	TargetID       string            `json:"target_id"`
	Meta           map[string]string `json:"meta"`
}

func (a *API) events(w http.ResponseWriter, r *http.Request, caller account.User) error {
	if err := requireAll(caller, auth.Events, auth.Read); err != nil {
		return err
	}
	if served, err := a.cachedEvents(w, r, caller.AccountID); served || err != nil {
		return err
	}
	return a.readEvents(w, r, caller.AccountID)
}

// readEvents lists the audit events as read, newest first.
func (a *API) readEvents(w http.ResponseWriter, r *http.Request, acc account.ID) error {
	var (
		es []account.Event
		us []account.User
	)
	err := a.o.Store.Read(r.Context(), func(tx *store.Tx) error {
		var err error
		if es, err = tx.In(acc).Events(r.Context(), 0); err != nil {
			return err
		}
		us, err = tx.In(acc).Users(r.Context())
		return err
	})
	if err != nil {
		return err
	}
	byID := map[string]account.User{}
	for _, u := range us {
		byID[string(u.ID)] = u
	}
	out := make([]eventJSON, 0, len(es))
	for _, e := range es {
		meta := e.Meta
		if meta == nil {
			meta = map[string]string{}
		}
		u := byID[e.Initiator]
		out = append(out, eventJSON{ID: fmt.Sprint(e.ID), Timestamp: ts(e.At), Activity: account.ActivityText(e.Activity), ActivityCode: e.Activity,
			InitiatorID: e.Initiator, InitiatorName: u.Name, InitiatorEmail: u.Email, TargetID: e.Target, Meta: meta})
	}
	return ok(w, out)
}
