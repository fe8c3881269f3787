package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/wiremesh/wiremesh/client/daemon"
	"github.com/wiremesh/wiremesh/internal/version"
	"github.com/wiremesh/wiremesh/proto/daemonpb"
)

// JSON shapes of `netbird status --json` (SPEC-wire.md appendix A).
type jsonStatus struct {
	Peers               jsonPeers  `json:"peers"`
	CliVersion          string     `json:"cliVersion"`
	DaemonVersion       string     `json:"daemonVersion"`
	DaemonStatus        string     `json:"daemonStatus"`
	Management          jsonConn   `json:"management"`
	Signal              jsonConn   `json:"signal"`
	Relays              jsonRelays `json:"relays"`
	NetbirdIP           string     `json:"netbirdIp"`
	NetbirdIPv6         string     `json:"netbirdIpv6,omitempty"` // with its prefix length, as NetbirdIP
	PublicKey           string     `json:"publicKey"`
	UsesKernelInterface bool       `json:"usesKernelInterface"`
	WireguardPort       int64      `json:"wireguardPort"`
	FQDN                string     `json:"fqdn"`
	Networks            []string   `json:"networks"`
	DNSServers          []string   `json:"dnsServers"`
	ProfileName         string     `json:"profileName"`
	ServerVersion       string     `json:"serverVersion"` // ours: the management server's version, when it says
	// Ours: the exit node in use (its network ID) and the routing peer
	// carrying it, when there is one.
	ExitNode     string `json:"exitNode,omitempty"`
	ExitNodePeer string `json:"exitNodePeer,omitempty"`
	// Ours: how the host's resolver is pointed at the agent.
	DNSMode string `json:"dnsMode,omitempty"`
	// Ours: whether this peer is on the IPv6 overlay, and why not.
	IPv6Mode string `json:"ipv6Mode,omitempty"`
}

type jsonPeers struct {
	Total     int        `json:"total"`
	Connected int        `json:"connected"`
	Details   []jsonPeer `json:"details"`
}

type jsonPair struct {
	Local  string `json:"local"`
	Remote string `json:"remote"`
}

type jsonPeer struct {
	FQDN                   string    `json:"fqdn"`
	NetbirdIP              string    `json:"netbirdIp"`
	NetbirdIPv6            string    `json:"netbirdIpv6,omitempty"`
	PublicKey              string    `json:"publicKey"`
	Status                 string    `json:"status"`
	LastStatusUpdate       time.Time `json:"lastStatusUpdate"`
	ConnectionType         string    `json:"connectionType"`
	IceCandidateType       jsonPair  `json:"iceCandidateType"`
	IceCandidateEndpoint   jsonPair  `json:"iceCandidateEndpoint"`
	RelayAddress           string    `json:"relayAddress"`
	LastWireguardHandshake time.Time `json:"lastWireguardHandshake"`
	TransferReceived       int64     `json:"transferReceived"`
	TransferSent           int64     `json:"transferSent"`
	Latency                int64     `json:"latency"`
	Networks               []string  `json:"networks"`
}

type jsonConn struct {
	URL       string `json:"url"`
	Connected bool   `json:"connected"`
	Error     string `json:"error"`
	// Ours, management only: the server keeps this peer pending until an
	// admin approves it.
	PendingApproval bool `json:"pendingApproval,omitempty"`
}

type jsonRelays struct {
	Total     int         `json:"total"`
	Available int         `json:"available"`
	Details   []jsonRelay `json:"details"`
}

type jsonRelay struct {
	URI       string `json:"uri"`
	Available bool   `json:"available"`
	Error     string `json:"error"`
}

func toJSON(r *daemonpb.StatusResponse) jsonStatus {
	fs := r.GetFullStatus()
	out := jsonStatus{
		CliVersion: version.Wire(), DaemonVersion: r.GetDaemonVersion(), DaemonStatus: r.GetStatus(),
		Management: jsonConn{URL: fs.GetManagementState().GetURL(), Connected: fs.GetManagementState().GetConnected(), Error: fs.GetManagementState().GetError(),
			PendingApproval: fs.GetManagementState().GetPendingApproval()},
		Signal:    jsonConn{URL: fs.GetSignalState().GetURL(), Connected: fs.GetSignalState().GetConnected(), Error: fs.GetSignalState().GetError()},
		Relays:    jsonRelays{Details: []jsonRelay{}},
		NetbirdIP: fs.GetLocalPeerState().GetIP(), NetbirdIPv6: fs.GetLocalPeerState().GetIpv6(), PublicKey: fs.GetLocalPeerState().GetPubKey(),
		UsesKernelInterface: fs.GetLocalPeerState().GetKernelInterface(), WireguardPort: fs.GetLocalPeerState().GetWgPort(),
		FQDN: fs.GetLocalPeerState().GetFqdn(), Networks: sortedCopy(fs.GetLocalPeerState().GetNetworks()), DNSServers: []string{}, ProfileName: r.GetProfileName(), ServerVersion: r.GetServerVersion(),
		Peers:    jsonPeers{Details: []jsonPeer{}},
		ExitNode: fs.GetLocalPeerState().GetExitNode(), ExitNodePeer: fs.GetLocalPeerState().GetExitNodePeer(),
		DNSMode: fs.GetLocalPeerState().GetDnsMode(), IPv6Mode: fs.GetLocalPeerState().GetIpv6Mode(),
	}
	for _, r := range fs.GetRelays() {
		out.Relays.Total++
		if r.GetAvailable() {
			out.Relays.Available++
		}
		out.Relays.Details = append(out.Relays.Details, jsonRelay{URI: r.GetURI(), Available: r.GetAvailable(), Error: r.GetError()})
	}
	for _, p := range fs.GetPeers() {
		ct := "-"
		if p.GetConnStatus() == daemon.StatusConnected {
			ct = "P2P"
			if p.GetRelayed() {
				ct = "Relayed"
			}
			out.Peers.Connected++
		}
		jp := jsonPeer{
			FQDN: p.GetFqdn(), NetbirdIP: p.GetIP(), NetbirdIPv6: p.GetIpv6(), PublicKey: p.GetPubKey(), Status: p.GetConnStatus(),
			LastStatusUpdate: p.GetConnStatusUpdate().AsTime(), ConnectionType: ct,
			IceCandidateType:     jsonPair{Local: p.GetLocalIceCandidateType(), Remote: p.GetRemoteIceCandidateType()},
			IceCandidateEndpoint: jsonPair{Local: p.GetLocalIceCandidateEndpoint(), Remote: p.GetRemoteIceCandidateEndpoint()},
			RelayAddress:         p.GetRelayAddress(), TransferReceived: p.GetBytesRx(), TransferSent: p.GetBytesTx(),
			Networks: sortedCopy(p.GetNetworks()),
		}
		if p.GetLastWireguardHandshake() != nil {
			jp.LastWireguardHandshake = p.GetLastWireguardHandshake().AsTime()
		}
		out.Peers.Details = append(out.Peers.Details, jp)
	}
	out.Peers.Total = len(out.Peers.Details)
	return out
}

func statusCmd(g *globals) *cobra.Command {
	var detail, asJSON, asYAML bool
	var filterIPs, filterNames []string
	var filterStatus, filterType, check string
	cmd := &cobra.Command{Use: "status", Short: "Show the connection status", Args: cobra.NoArgs}
	f := cmd.Flags()
	f.BoolVarP(&detail, "detail", "d", false, "show every peer")
	f.BoolVarP(&asJSON, "json", "j", false, "print JSON")
	f.BoolVarP(&asYAML, "yaml", "y", false, "print YAML (not supported; prints JSON)")
	f.Bool("ipv4", false, "print only the IPv4 address")
	f.BoolP("ipv6", "6", false, "print only the IPv6 overlay address (nothing when this peer has none)")
	f.StringSliceVarP(&filterIPs, "filter-by-ips", "I", nil, "only these peer IPs")
	f.StringSliceVarP(&filterNames, "filter-by-names", "N", nil, "only these peer names")
	f.StringVarP(&filterStatus, "filter-by-status", "S", "", "idle, connecting or connected")
	f.StringVarP(&filterType, "filter-by-connection-type", "T", "", "P2P or Relayed")
	f.StringVarP(&check, "check", "C", "", "exit status probe: live, ready or startup")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		c, done, err := g.daemon(cmd.Context())
		if err != nil {
			if check != "" {
				os.Exit(1)
			}
			return err
		}
		defer done()
		r, err := c.Status(cmd.Context(), &daemonpb.StatusRequest{GetFullPeerStatus: true})
		if err != nil {
			return plain(err)
		}
		if check != "" {
			if check == "live" || r.GetStatus() == daemon.StatusConnected {
				return nil
			}
			os.Exit(1)
		}
		js := toJSON(r)
		js.Peers.Details = filter(js.Peers.Details, filterIPs, filterNames, filterStatus, filterType)
		if ipv4, _ := cmd.Flags().GetBool("ipv4"); ipv4 {
			ip, _, _ := strings.Cut(js.NetbirdIP, "/")
			fmt.Println(ip)
			return nil
		}
		if ipv6, _ := cmd.Flags().GetBool("ipv6"); ipv6 {
			if ip, _, _ := strings.Cut(js.NetbirdIPv6, "/"); ip != "" {
				fmt.Println(ip)
			}
			return nil
		}
		if asJSON || asYAML {
			enc := json.NewEncoder(os.Stdout)
			enc.SetIndent("", "  ")
			return enc.Encode(js)
		}
		printText(os.Stdout, js, detail)
		return nil
	}
	return cmd
}

func filter(ps []jsonPeer, ips, names []string, st, ct string) []jsonPeer {
	in := func(v string, set []string) bool {
		for _, s := range set {
			if strings.EqualFold(s, v) {
				return true
			}
		}
		return len(set) == 0
	}
	out := []jsonPeer{}
	for _, p := range ps {
		if (in(p.NetbirdIP, ips) || (p.NetbirdIPv6 != "" && in(p.NetbirdIPv6, ips))) && in(p.FQDN, names) && (st == "" || strings.EqualFold(st, p.Status)) && (ct == "" || strings.EqualFold(ct, p.ConnectionType)) {
			out = append(out, p)
		}
	}
	return out
}

func ago(t time.Time) string {
	if t.IsZero() || t.Unix() <= 0 {
		return "-"
	}
	return time.Since(t).Round(time.Second).String() + " ago"
}

func printText(w io.Writer, s jsonStatus, detail bool) {
	conn := func(c jsonConn) string {
		if c.Connected {
			return "Connected"
		}
		if c.Error != "" {
			return "Disconnected, reason: " + c.Error
		}
		return "Disconnected"
	}
	if detail {
		fmt.Fprintln(w, "Peers detail:")
		for _, p := range s.Peers.Details {
			fmt.Fprintf(w, " %s:\n  NetBird IP: %s\n%s  Public key: %s\n  Status: %s\n  -- detail --\n  Connection type: %s\n  ICE candidate (Local/Remote): %s/%s\n  ICE candidate endpoints (Local/Remote): %s/%s\n  Last connection update: %s\n  Last WireGuard handshake: %s\n  Transfer status (received/sent) %d B/%d B\n  Networks: %s\n\n",
				p.FQDN, p.NetbirdIP, ipv6Line("  ", p.NetbirdIPv6), p.PublicKey, p.Status, p.ConnectionType, dash(p.IceCandidateType.Local), dash(p.IceCandidateType.Remote),
				dash(p.IceCandidateEndpoint.Local), dash(p.IceCandidateEndpoint.Remote), ago(p.LastStatusUpdate), ago(p.LastWireguardHandshake),
				p.TransferReceived, p.TransferSent, dash(strings.Join(p.Networks, ", ")))
		}
	}
	fmt.Fprintf(w, "Daemon version: %s\nCLI version: %s\nProfile: %s\nDaemon status: %s\nManagement: %s (server version %s)\nSignal: %s\nRelays: %d/%d Available\nFQDN: %s\nNetBird IP: %s\n%sInterface type: %s\nNetworks: %s\nExit node: %s\nPeers count: %d/%d Connected\n",
		s.DaemonVersion, s.CliVersion, dash(s.ProfileName), s.DaemonStatus, conn(s.Management), dash(s.ServerVersion), conn(s.Signal),
		s.Relays.Available, s.Relays.Total, dash(s.FQDN), dash(s.NetbirdIP), ipv6Line("", s.NetbirdIPv6),
		map[bool]string{true: "Kernel", false: "Userspace"}[s.UsesKernelInterface], dash(strings.Join(s.Networks, ", ")), exitNodeText(s),
		s.Peers.Connected, s.Peers.Total)
	if detail {
		fmt.Fprintf(w, "DNS: %s\nIPv6: %s\n", dash(s.DNSMode), dash(s.IPv6Mode))
	}
	if s.Management.PendingApproval {
		fmt.Fprintln(w, "Peer approval: pending approval (an administrator of the account must approve this peer before it can reach other peers)")
	}
}

// ipv6Line is the "NetBird IPv6:" line, only for a peer on the IPv6
// overlay (as the official CLI prints it).
func ipv6Line(indent, ip string) string {
	if ip == "" {
		return ""
	}
	return indent + "NetBird IPv6: " + ip + "\n"
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// exitNodeText is the "Exit node:" line: the exit node in use and the
// routing peer carrying it ("-" when internet traffic leaves locally).
func exitNodeText(s jsonStatus) string {
	switch {
	case s.ExitNode == "":
		return "-"
	case s.ExitNodePeer == "":
		return s.ExitNode + " (no routing peer connected)"
	}
	return s.ExitNode + " via " + s.ExitNodePeer
}

// sortedCopy returns ss sorted, as the official CLI lists networks, and
// never nil (the JSON shape has [] for none).
func sortedCopy(ss []string) []string {
	out := append([]string{}, ss...)
	slices.Sort(out)
	return out
}
