package httpapi

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/wiremesh/wiremesh/management/access"
	"github.com/wiremesh/wiremesh/management/account"
	"github.com/wiremesh/wiremesh/management/auth"
	"github.com/wiremesh/wiremesh/management/setupkey"
	"github.com/wiremesh/wiremesh/management/store"
	"github.com/wiremesh/wiremesh/management/users"
)

// The resources of access control: groups, policies, posture checks and
// setup keys. Who may read and change them is the role table's
// (permissions.go); a regular user reads groups with only its own peers
// in them.

// adminDelete runs a deletion the caller's role must allow on every
// object of module and answers {}.
func adminDelete(w http.ResponseWriter, caller account.User, m auth.Module, del func() error) error {
	if err := requireAll(caller, m, auth.Delete); err != nil {
		return err
	}
	if err := del(); err != nil {
		return err
	}
	return ok(w, struct{}{})
}

type peerMinimum struct {
	ID   string `json:"id"`
	Name string `json:"name"`
}

type groupJSON struct {
	ID             string         `json:"id"`
	Name           string         `json:"name"`
	PeersCount     int            `json:"peers_count"`
	ResourcesCount int            `json:"resources_count"`
	Issued         string         `json:"issued"`
	Peers          []peerMinimum  `json:"peers"`
	Resources      []resourceJSON `json:"resources"`
}

// accessView is an account's groups and peers, read together.
type accessView struct {
	groups []account.Group
	// peers are those the caller may see, by ID, name and user only (a
	// group or rule shows no more of them), oldest first.
	peers  []store.PeerName
	byID   map[account.PeerID]int
	npeers int
	// mins are the groups as rules show them, derived once per view
	// (a policy list names groups thousands of times).
	mins map[account.GroupID]groupMinimum
	// resources are the network resources placed in each group;
	// resourceTypes the type of every resource of the account.
	resources     map[account.GroupID][]resourceJSON
	resourceTypes map[account.NetworkResourceID]string
}

// accessView reads what the caller may see of the account's groups and
// peers: a regular user sees only its own peers in them (as peers and in
// peers_count), never the names and IDs of the others'.
func (a *API) accessView(r *http.Request, caller account.User) (accessView, error) {
	var v accessView
	err := a.o.Store.Read(r.Context(), func(tx *store.Tx) error {
		at := tx.In(caller.AccountID)
		var err error
		if v.groups, err = at.Groups(r.Context()); err != nil {
			return err
		}
		rs, err := at.NetworkResources(r.Context())
		if err != nil {
			return err
		}
		v.resources = map[account.GroupID][]resourceJSON{}
		v.resourceTypes = make(map[account.NetworkResourceID]string, len(rs))
		for _, res := range rs {
			v.resourceTypes[res.ID] = res.Type
			for _, g := range res.Groups {
				v.resources[g] = append(v.resources[g], resourceJSON{ID: string(res.ID), Type: res.Type})
			}
		}
		ps, err := at.PeerNames(r.Context())
		v.peers = make([]store.PeerName, 0, len(ps))
		for _, p := range ps {
			if seesAll(caller, auth.Peers) || p.UserID == caller.ID {
				v.peers = append(v.peers, p)
			}
		}
		return err
	})
	v.npeers = len(v.peers)
	v.byID = make(map[account.PeerID]int, len(v.peers))
	for i, p := range v.peers {
		v.byID[p.ID] = i
	}
	v.mins = make(map[account.GroupID]groupMinimum, len(v.groups))
	for _, g := range v.groups {
		n := v.npeers
		if !g.All {
			n = 0
			for _, id := range g.Peers {
				if _, ok := v.byID[id]; ok {
					n++
				}
			}
		}
		if _, dup := v.mins[g.ID]; !dup {
			v.mins[g.ID] = groupMinimum{ID: string(g.ID), Name: g.Name, PeersCount: n, ResourcesCount: len(v.resources[g.ID])}
		}
	}
	return v, err
}

func (v accessView) group(g account.Group) groupJSON {
	out := groupJSON{ID: string(g.ID), Name: g.Name, Issued: "api", Peers: []peerMinimum{}, Resources: []resourceJSON{}}
	if g.All {
		out.Peers = make([]peerMinimum, 0, len(v.peers))
		for _, p := range v.peers {
			out.Peers = append(out.Peers, peerMinimum{ID: string(p.ID), Name: p.Name})
		}
	} else {
		for _, id := range g.Peers {
			if i, ok := v.byID[id]; ok {
				out.Peers = append(out.Peers, peerMinimum{ID: string(v.peers[i].ID), Name: v.peers[i].Name})
			}
		}
	}
	out.PeersCount = len(out.Peers)
	if rs := v.resources[g.ID]; len(rs) > 0 {
		out.Resources = rs
	}
	out.ResourcesCount = len(out.Resources)
	return out
}

func (v accessView) minimum(id account.GroupID) (groupMinimum, bool) {
	g, ok := v.mins[id]
	return g, ok
}

func (a *API) listGroups(w http.ResponseWriter, r *http.Request, caller account.User) error {
	name := r.URL.Query().Get("name")
	build := func() (any, error) {
		v, err := a.accessView(r, caller)
		if err != nil {
			return nil, err
		}
		out := []groupJSON{}
		for _, g := range v.groups {
			if name == "" || g.Name == name {
				out = append(out, v.group(g))
			}
		}
		if name != "" && len(out) == 0 {
			return nil, users.ErrNotFound
		}
		return out, nil
	}
	if name == "" && seesAll(caller, auth.Peers) {
		// Every such caller gets the same answer: cached.
		return a.cachedList(r.Context(), w, caller.AccountID, "groups", build)
	}
	out, err := build()
	if err != nil {
		return err
	}
	return ok(w, out)
}

func (a *API) getGroup(w http.ResponseWriter, r *http.Request, caller account.User) error {
	v, err := a.accessView(r, caller)
	if err != nil {
		return err
	}
	for _, g := range v.groups {
		if string(g.ID) == r.PathValue("groupId") {
			return ok(w, v.group(g))
		}
	}
	return users.ErrNotFound
}

func (a *API) putGroup(w http.ResponseWriter, r *http.Request, caller account.User) error {
	if err := requireAll(caller, auth.Groups, writeOp(r)); err != nil {
		return err
	}
	var req struct {
		Name  string   `json:"name"`
		Peers []string `json:"peers"`
		// Resources, when present, are the network resources the group
		// holds (all of them: omitted leaves them as they are).
		Resources *[]resourceJSON `json:"resources"`
	}
	if err := decode(r, &req); err != nil {
		return err
	}
	peers := make([]account.PeerID, 0, len(req.Peers))
	for _, p := range req.Peers {
		peers = append(peers, account.PeerID(p))
	}
	id := account.GroupID(r.PathValue("groupId"))
	var g account.Group
	var err error
	if req.Resources == nil {
		g, err = a.o.Access.PutGroup(r.Context(), caller.AccountID, id, req.Name, peers, string(caller.ID))
	} else {
		res := make([]account.NetworkResourceID, 0, len(*req.Resources))
		for _, rs := range *req.Resources {
			if rs.Type == "peer" {
				return invalid("resources: a peer (%s) joins a group through peers, not resources", rs.ID)
			}
			res = append(res, account.NetworkResourceID(rs.ID))
		}
		g, err = a.o.Access.PutGroupResources(r.Context(), caller.AccountID, id, req.Name, peers, res, string(caller.ID))
	}
	if err != nil {
		return err
	}
	v, err := a.accessView(r, caller)
	if err != nil {
		return err
	}
	return ok(w, v.group(g))
}

func (a *API) deleteGroup(w http.ResponseWriter, r *http.Request, caller account.User) error {
	return adminDelete(w, caller, auth.Groups, func() error {
		return a.o.Access.DeleteGroup(r.Context(), caller.AccountID, account.GroupID(r.PathValue("groupId")), string(caller.ID))
	})
}

// --- policies ---

type portRangeJSON struct {
	Start int `json:"start"`
	End   int `json:"end"`
}

type ruleRequest struct {
	ID            string          `json:"id"`
	Name          string          `json:"name"`
	Description   string          `json:"description"`
	Enabled       bool            `json:"enabled"`
	Action        string          `json:"action"`
	Bidirectional bool            `json:"bidirectional"`
	Protocol      string          `json:"protocol"`
	Ports         []string        `json:"ports"`
	PortRanges    []portRangeJSON `json:"port_ranges"`
	Sources       []string        `json:"sources"`
	Destinations  []string        `json:"destinations"`
	SourceRes     *resourceJSON   `json:"sourceResource"`
	DestRes       *resourceJSON   `json:"destinationResource"`
}

// resourceJSON is a rule side that is not a group (a single peer, type
// "peer", or a network resource, type host, subnet or domain), and a
// group's network resource.
type resourceJSON struct {
	ID   string `json:"id"`
	Type string `json:"type"`
}

func peerResource(r *resourceJSON, groups []string, side string) (account.PeerID, error) {
	if r == nil {
		return "", nil
	}
	if groups != nil {
		return "", invalid("%s: give either groups or a resource, not both", side)
	}
	if r.Type != "peer" {
		return "", invalid("sourceResource: type %q; a rule's source resource is a peer (type peer) or use source groups", r.Type)
	}
	return account.PeerID(r.ID), nil
}

// destResource reads a rule's destinationResource: a peer, or a network
// resource (its type is the resource's own, checked on the way in by the
// domain service's existence check and reported from the store on the
// way out).
func destResource(r *resourceJSON, groups []string) (account.PeerID, account.NetworkResourceID, error) {
	if r == nil {
		return "", "", nil
	}
	if groups != nil {
		return "", "", invalid("destination: give either groups or a resource, not both")
	}
	switch r.Type {
	case "peer":
		return account.PeerID(r.ID), "", nil
	case account.ResourceHost, account.ResourceSubnet, account.ResourceDomain:
		if r.ID == "" {
			return "", "", invalid("destinationResource: id is required")
		}
		return "", account.NetworkResourceID(r.ID), nil
	}
	return "", "", invalid("destinationResource: type %q (want peer, host, subnet or domain)", r.Type)
}

type policyRequest struct {
	Name          string        `json:"name"`
	Description   string        `json:"description"`
	Enabled       bool          `json:"enabled"`
	PostureChecks []string      `json:"source_posture_checks"`
	Rules         []ruleRequest `json:"rules"`
}

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{access.ErrInvalid}, args...)...)
}

func port(v int) (uint16, error) {
	if v < 1 || v > 65535 {
		return 0, invalid("port %d is outside 1-65535", v)
	}
	return uint16(v), nil
}

func (req policyRequest) policy() (account.Policy, error) {
	p := account.Policy{Name: req.Name, Description: req.Description, Enabled: req.Enabled, PostureChecks: req.PostureChecks}
	for _, rr := range req.Rules {
		r := account.Rule{ID: rr.ID, Name: rr.Name, Enabled: rr.Enabled, Action: rr.Action, Protocol: rr.Protocol, Bidirectional: rr.Bidirectional}
		var err error
		if r.SourcePeer, err = peerResource(rr.SourceRes, rr.Sources, "source"); err != nil {
			return p, err
		}
		if r.DestinationPeer, r.DestinationResource, err = destResource(rr.DestRes, rr.Destinations); err != nil {
			return p, err
		}
		for _, s := range rr.Ports {
			n, err := strconv.Atoi(strings.TrimSpace(s))
			if err != nil {
				return p, invalid("port %q is not a number", s)
			}
			pt, err := port(n)
			if err != nil {
				return p, err
			}
			r.Ports = append(r.Ports, pt)
		}
		for _, pr := range rr.PortRanges {
			s, err := port(pr.Start)
			if err != nil {
				return p, err
			}
			e, err := port(pr.End)
			if err != nil {
				return p, err
			}
			r.PortRanges = append(r.PortRanges, account.PortRange{Start: s, End: e})
		}
		for _, g := range rr.Sources {
			r.Sources = append(r.Sources, account.GroupID(g))
		}
		for _, g := range rr.Destinations {
			r.Destinations = append(r.Destinations, account.GroupID(g))
		}
		p.Rules = append(p.Rules, r)
	}
	return p, nil
}

type ruleJSON struct {
	ID            string          `json:"id"`
	Name          string          `json:"name"`
	Description   string          `json:"description"`
	Enabled       bool            `json:"enabled"`
	Action        string          `json:"action"`
	Bidirectional bool            `json:"bidirectional"`
	Protocol      string          `json:"protocol"`
	Ports         []string        `json:"ports,omitempty"`
	PortRanges    []portRangeJSON `json:"port_ranges,omitempty"`
	// Sources and Destinations are absent on a side given as a resource.
	Sources      *[]groupMinimum `json:"sources,omitempty"`
	Destinations *[]groupMinimum `json:"destinations,omitempty"`
	SourceRes    *resourceJSON   `json:"sourceResource,omitempty"`
	DestRes      *resourceJSON   `json:"destinationResource,omitempty"`
}

type policyJSON struct {
	ID            string     `json:"id"`
	Name          string     `json:"name"`
	Description   string     `json:"description"`
	Enabled       bool       `json:"enabled"`
	PostureChecks []string   `json:"source_posture_checks"`
	Rules         []ruleJSON `json:"rules"`
}

func (v accessView) policy(p account.Policy) policyJSON {
	out := policyJSON{ID: string(p.ID), Name: p.Name, Description: p.Description, Enabled: p.Enabled, PostureChecks: p.PostureChecks, Rules: []ruleJSON{}}
	if out.PostureChecks == nil {
		out.PostureChecks = []string{}
	}
	groups := func(ids []account.GroupID) *[]groupMinimum {
		gs := []groupMinimum{}
		for _, id := range ids {
			if g, ok := v.minimum(id); ok {
				gs = append(gs, g)
			}
		}
		return &gs
	}
	for _, r := range p.Rules {
		j := ruleJSON{ID: r.ID, Name: r.Name, Enabled: r.Enabled, Action: r.Action, Bidirectional: r.Bidirectional, Protocol: r.Protocol,
			Sources: groups(r.Sources), Destinations: groups(r.Destinations)}
		if r.SourcePeer != "" {
			j.Sources, j.SourceRes = nil, &resourceJSON{ID: string(r.SourcePeer), Type: "peer"}
		}
		if r.DestinationPeer != "" {
			j.Destinations, j.DestRes = nil, &resourceJSON{ID: string(r.DestinationPeer), Type: "peer"}
		}
		if r.DestinationResource != "" {
			j.Destinations, j.DestRes = nil, &resourceJSON{ID: string(r.DestinationResource), Type: v.resourceTypes[r.DestinationResource]}
		}
		for _, pt := range r.Ports {
			j.Ports = append(j.Ports, strconv.Itoa(int(pt)))
		}
		for _, pr := range r.PortRanges {
			j.PortRanges = append(j.PortRanges, portRangeJSON{Start: int(pr.Start), End: int(pr.End)})
		}
		out.Rules = append(out.Rules, j)
	}
	return out
}

func (a *API) policies(r *http.Request, acc account.ID) ([]account.Policy, error) {
	var ps []account.Policy
	err := a.o.Store.Read(r.Context(), func(tx *store.Tx) error {
		var err error
		ps, err = tx.In(acc).Policies(r.Context())
		return err
	})
	return ps, err
}

func (a *API) listPolicies(w http.ResponseWriter, r *http.Request, caller account.User) error {
	build := func() (any, error) {
		ps, err := a.policies(r, caller.AccountID)
		if err != nil {
			return nil, err
		}
		v, err := a.accessView(r, caller)
		if err != nil {
			return nil, err
		}
		out := []policyJSON{}
		for _, p := range ps {
			out = append(out, v.policy(p))
		}
		return out, nil
	}
	if seesAll(caller, auth.Peers) {
		// Every such caller gets the same answer: cached.
		return a.cachedList(r.Context(), w, caller.AccountID, "policies", build)
	}
	out, err := build()
	if err != nil {
		return err
	}
	return ok(w, out)
}

func (a *API) getPolicy(w http.ResponseWriter, r *http.Request, caller account.User) error {
	ps, err := a.policies(r, caller.AccountID)
	if err != nil {
		return err
	}
	v, err := a.accessView(r, caller)
	if err != nil {
		return err
	}
	for _, p := range ps {
		if string(p.ID) == r.PathValue("policyId") {
			return ok(w, v.policy(p))
		}
	}
	return users.ErrNotFound
}

func (a *API) putPolicy(w http.ResponseWriter, r *http.Request, caller account.User) error {
	if err := requireAll(caller, auth.Policies, writeOp(r)); err != nil {
		return err
	}
	var req policyRequest
	if err := decode(r, &req); err != nil {
		return err
	}
	p, err := req.policy()
	if err != nil {
		return err
	}
	p.ID = account.PolicyID(r.PathValue("policyId"))
	if p.ID == "" {
		for i := range p.Rules {
			p.Rules[i].ID = "" // new rules get new IDs
		}
	}
	if p, err = a.o.Access.PutPolicy(r.Context(), caller.AccountID, p, string(caller.ID)); err != nil {
		return err
	}
	v, err := a.accessView(r, caller)
	if err != nil {
		return err
	}
	return ok(w, v.policy(p))
}

func (a *API) deletePolicy(w http.ResponseWriter, r *http.Request, caller account.User) error {
	return adminDelete(w, caller, auth.Policies, func() error {
		return a.o.Access.DeletePolicy(r.Context(), caller.AccountID, account.PolicyID(r.PathValue("policyId")), string(caller.ID))
	})
}

// --- posture checks ---

type postureJSON struct {
	ID          string         `json:"id"`
	Name        string         `json:"name"`
	Description string         `json:"description"`
	Checks      account.Checks `json:"checks"`
}

func (a *API) postureChecks(r *http.Request, acc account.ID) ([]account.PostureCheck, error) {
	var cs []account.PostureCheck
	err := a.o.Store.Read(r.Context(), func(tx *store.Tx) error {
		var err error
		cs, err = tx.In(acc).PostureChecks(r.Context())
		return err
	})
	return cs, err
}

func (a *API) listPosture(w http.ResponseWriter, r *http.Request, caller account.User) error {
	cs, err := a.postureChecks(r, caller.AccountID)
	if err != nil {
		return err
	}
	out := []postureJSON{}
	for _, c := range cs {
		out = append(out, postureJSON{ID: string(c.ID), Name: c.Name, Description: c.Description, Checks: c.Checks})
	}
	return ok(w, out)
}

func (a *API) getPosture(w http.ResponseWriter, r *http.Request, caller account.User) error {
	cs, err := a.postureChecks(r, caller.AccountID)
	if err != nil {
		return err
	}
	for _, c := range cs {
		if string(c.ID) == r.PathValue("postureCheckId") {
			return ok(w, postureJSON{ID: string(c.ID), Name: c.Name, Description: c.Description, Checks: c.Checks})
		}
	}
	return users.ErrNotFound
}

func (a *API) putPosture(w http.ResponseWriter, r *http.Request, caller account.User) error {
	if err := requireAll(caller, auth.Policies, writeOp(r)); err != nil {
		return err
	}
	var req postureJSON
	if err := decode(r, &req); err != nil {
		return err
	}
	c, err := a.o.Access.PutPostureCheck(r.Context(), caller.AccountID, account.PostureCheck{ID: account.PostureCheckID(r.PathValue("postureCheckId")),
		Name: req.Name, Description: req.Description, Checks: req.Checks}, string(caller.ID))
	if err != nil {
		return err
	}
	return ok(w, postureJSON{ID: string(c.ID), Name: c.Name, Description: c.Description, Checks: c.Checks})
}

func (a *API) deletePosture(w http.ResponseWriter, r *http.Request, caller account.User) error {
	return adminDelete(w, caller, auth.Policies, func() error {
		return a.o.Access.DeletePostureCheck(r.Context(), caller.AccountID, account.PostureCheckID(r.PathValue("postureCheckId")), string(caller.ID))
	})
}

// --- setup keys ---

// errExtraDNSLabels refuses allow_extra_dns_labels true: the server does
// not publish the extra DNS labels agents send at login (--extra-dns-labels)
// in the account's DNS zone, so a key cannot allow them.
var errExtraDNSLabels = invalid("allow_extra_dns_labels: extra DNS labels are not supported by this server; omit the field or send false")

type setupKeyJSON struct {
	ID                  string   `json:"id"`
	Key                 string   `json:"key"`
	Name                string   `json:"name"`
	Type                string   `json:"type"`
	Expires             string   `json:"expires"`
	Valid               bool     `json:"valid"`
	Revoked             bool     `json:"revoked"`
	UsedTimes           int      `json:"used_times"`
	LastUsed            string   `json:"last_used"`
	State               string   `json:"state"`
	AutoGroups          []string `json:"auto_groups"`
	UpdatedAt           string   `json:"updated_at"`
	UsageLimit          int      `json:"usage_limit"`
	Ephemeral           bool     `json:"ephemeral"`
	AllowExtraDNSLabels bool     `json:"allow_extra_dns_labels"`
}

func toSetupKey(k account.SetupKey, plain string) setupKeyJSON {
	state := setupkey.State(k, time.Now())
	if state == "exhausted" {
		state = "overused"
	}
	typ := "one-off"
	if k.Reusable {
		typ = "reusable"
	}
	key := plain
	if key == "" {
		key = k.Prefix
		if len(key) > 5 {
			key = key[:5]
		}
		key += "****"
	}
	groups := k.AutoGroups
	if groups == nil {
		groups = []string{}
	}
	return setupKeyJSON{ID: string(k.ID), Key: key, Name: k.Name, Type: typ, Expires: ts(k.ExpiresAt), Valid: state == "valid", Revoked: k.Revoked,
		UsedTimes: k.UsedTimes, LastUsed: ts(k.LastUsed), State: state, AutoGroups: groups, UpdatedAt: ts(k.CreatedAt),
		UsageLimit: k.UsageLimit, Ephemeral: k.Ephemeral}
}

func (a *API) setupKeys(r *http.Request, acc account.ID) ([]account.SetupKey, error) {
	var ks []account.SetupKey
	err := a.o.Store.Read(r.Context(), func(tx *store.Tx) error {
		var err error
		ks, err = tx.In(acc).SetupKeys(r.Context())
		return err
	})
	return ks, err
}

func (a *API) listSetupKeys(w http.ResponseWriter, r *http.Request, caller account.User) error {
	if err := requireAll(caller, auth.SetupKeys, auth.Read); err != nil {
		return err
	}
	ks, err := a.setupKeys(r, caller.AccountID)
	if err != nil {
		return err
	}
	out := []setupKeyJSON{}
	for _, k := range ks {
		out = append(out, toSetupKey(k, ""))
	}
	return ok(w, out)
}

func (a *API) getSetupKey(w http.ResponseWriter, r *http.Request, caller account.User) error {
	if err := requireAll(caller, auth.SetupKeys, auth.Read); err != nil {
		return err
	}
	ks, err := a.setupKeys(r, caller.AccountID)
	if err != nil {
		return err
	}
	for _, k := range ks {
		if string(k.ID) == r.PathValue("keyId") {
			return ok(w, toSetupKey(k, ""))
		}
	}
	return users.ErrNotFound
}

func (a *API) createSetupKey(w http.ResponseWriter, r *http.Request, caller account.User) error {
	if err := requireAll(caller, auth.SetupKeys, auth.Create); err != nil {
		return err
	}
	var req struct {
		Name       string   `json:"name"`
		Type       string   `json:"type"`
		ExpiresIn  int64    `json:"expires_in"`
		AutoGroups []string `json:"auto_groups"`
		UsageLimit int      `json:"usage_limit"`
		Ephemeral  bool     `json:"ephemeral"`
		// AllowExtraDNSLabels is refused when true (errExtraDNSLabels).
		AllowExtraDNSLabels bool `json:"allow_extra_dns_labels"`
	}
	if err := decode(r, &req); err != nil {
		return err
	}
	if req.AllowExtraDNSLabels {
		return errExtraDNSLabels
	}
	if req.Type != "reusable" && req.Type != "one-off" {
		return invalid("type %q (want reusable or one-off)", req.Type)
	}
	if req.ExpiresIn < 0 || req.ExpiresIn > int64(setupkey.MaxExpiry/time.Second) {
		return invalid("expires_in must be 0 (never) to %d seconds", int64(setupkey.MaxExpiry/time.Second))
	}
	o := setupkey.Options{Name: req.Name, Reusable: req.Type == "reusable", UsageLimit: req.UsageLimit, AutoGroups: req.AutoGroups,
		Ephemeral: req.Ephemeral, Expiry: time.Duration(req.ExpiresIn) * time.Second}
	if req.ExpiresIn == 0 {
		o.Expiry = -1 // never
	}
	if !o.Reusable {
		o.UsageLimit = 0
	}
	k, secret, err := a.o.Access.CreateSetupKey(r.Context(), caller.AccountID, o, string(caller.ID))
	if err != nil {
		return err
	}
	w.Header().Set("Cache-Control", "no-store")
	return ok(w, toSetupKey(k, secret))
}

func (a *API) updateSetupKey(w http.ResponseWriter, r *http.Request, caller account.User) error {
	if err := requireAll(caller, auth.SetupKeys, auth.Update); err != nil {
		return err
	}
	var req struct {
		Revoked    bool     `json:"revoked"`
		AutoGroups []string `json:"auto_groups"`
		// AllowExtraDNSLabels: as on create, true is refused.
		AllowExtraDNSLabels bool `json:"allow_extra_dns_labels"`
	}
	if err := decode(r, &req); err != nil {
		return err
	}
	if req.AllowExtraDNSLabels {
		return errExtraDNSLabels
	}
	k, err := a.o.Access.UpdateSetupKey(r.Context(), caller.AccountID, account.SetupKeyID(r.PathValue("keyId")), req.Revoked, req.AutoGroups, string(caller.ID))
	if err != nil {
		return err
	}
	return ok(w, toSetupKey(k, ""))
}

func (a *API) deleteSetupKey(w http.ResponseWriter, r *http.Request, caller account.User) error {
	return adminDelete(w, caller, auth.SetupKeys, func() error {
		return a.o.Access.DeleteSetupKey(r.Context(), caller.AccountID, account.SetupKeyID(r.PathValue("keyId")), string(caller.ID))
	})
}
