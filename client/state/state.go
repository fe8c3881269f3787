// Package state keeps the agent's profile on disk: its WireGuard private
// key (its identity) and the options of the last `up`, in one 0600 JSON
// file under the state directory, so a restart keeps both.
package state

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/wiremesh/wiremesh/internal/key"
)

// DefaultDir is where state lives unless NB_STATE_DIR says otherwise.
const DefaultDir = "/var/lib/netbird"

// Dir returns the state directory.
func Dir() string {
	if d := os.Getenv("NB_STATE_DIR"); d != "" {
		return d
	}
	return DefaultDir
}

// DefaultPath is the config file inside Dir.
func DefaultPath() string { return filepath.Join(Dir(), "config.json") }

// Config is the persisted profile.
type Config struct {
	PrivateKey    string `json:"private_key"`
	ManagementURL string `json:"management_url,omitempty"`
	AdminURL      string `json:"admin_url,omitempty"` // the dashboard, for the user's reference
	Hostname      string `json:"hostname,omitempty"`
	InterfaceName string `json:"interface_name,omitempty"`
	WireguardPort int    `json:"wireguard_port,omitempty"`
	MTU           int    `json:"mtu,omitempty"`
	DisableDNS    bool   `json:"disable_dns,omitempty"`
	// DisableIPv6: this machine takes no address on the IPv6 overlay
	// (netbird up --disable-ipv6); it stops announcing the capability.
	DisableIPv6 bool `json:"disable_ipv6,omitempty"`
	// ServerKeys pins each management server's key (by URL) at first
	// login, so a server that later presents another identity is noticed.
	ServerKeys map[string]string `json:"server_keys,omitempty"`
	// Up records that the profile was connected, so the daemon brings it
	// up again after a restart.
	Up bool `json:"up,omitempty"`
	// Routes is the user's choice among the networks and exit nodes
	// management offers (netbird networks select/deselect, up
	// --exit-node), so a restart keeps it.
	Routes RouteSelection `json:"route_selection,omitzero"`
	// ExitNodeBlockLAN sends local LAN traffic into the tunnel too while
	// an exit node carries internet traffic (netbird up
	// --exit-node-block-lan); by default, as with the official client,
	// the LAN stays reachable directly.
	ExitNodeBlockLAN bool `json:"exit_node_block_lan,omitempty"`
	// DisableClientRoutes: this machine installs none of the routes
	// management offers it (netbird up --disable-client-routes).
	DisableClientRoutes bool `json:"disable_client_routes,omitempty"`
	// DisableServerRoutes: this machine routes for nobody, even where
	// management made it a routing peer or exit node (netbird up
	// --disable-server-routes).
	DisableServerRoutes bool `json:"disable_server_routes,omitempty"`
	// BlockLANAccess: as a routing peer or exit node, this machine drops
	// routed traffic to its own local networks unless a route names them
	// (netbird up --block-lan-access).
	BlockLANAccess bool `json:"block_lan_access,omitempty"`
	// ServerSSHAllowed runs the SSH server when management enables SSH
	// for this peer (netbird up --allow-server-ssh); EnableSSHRoot lets
	// clients log in as root (--enable-ssh-root).
	ServerSSHAllowed bool `json:"server_ssh_allowed,omitempty"`
	EnableSSHRoot    bool `json:"enable_ssh_root,omitempty"`
	// EnableSSHLocalPortForwarding and EnableSSHRemotePortForwarding
	// allow ssh -L and ssh -R through the SSH server
	// (--enable-ssh-local-port-forwarding,
	// --enable-ssh-remote-port-forwarding); off by default.
	EnableSSHLocalPortForwarding  bool `json:"enable_ssh_local_port_forwarding,omitempty"`
	EnableSSHRemotePortForwarding bool `json:"enable_ssh_remote_port_forwarding,omitempty"`
	// DisableSSHAuth takes no identity-provider tokens on the SSH server
	// (netbird up --disable-ssh-auth): keys only, and no
	// NetBird-JWT-Required marker, so NetBird's clients log in with their
	// keys.
	DisableSSHAuth bool `json:"disable_ssh_auth,omitempty"`
	// SSHKey is the SSH key this peer rotated to (netbird ssh rotate-key):
	// an ed25519 private key, PEM (PKCS #8). Empty, as in every profile
	// that never rotated, the SSH key is the one derived from PrivateKey.
	SSHKey string `json:"ssh_key,omitempty"`
}

// RouteSelection is a route selection as stored: network IDs the user
// selected or deselected explicitly; networks named in neither follow
// the default (selected, except exit nodes management marks as not
// applied automatically), unless AllDeselected.
type RouteSelection struct {
	Selected      []string `json:"selected,omitempty"`
	Deselected    []string `json:"deselected,omitempty"`
	AllDeselected bool     `json:"all_deselected,omitempty"`
}

// Defaults of the official client.
const (
	DefaultInterface = "wt0"
	DefaultPort      = 51820
	DefaultMTU       = 1280
)

// Load reads path, creating a config with a fresh key if it does not exist.
func Load(path string) (Config, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		k, err := key.NewPrivate()
		if err != nil {
			return Config{}, err
		}
		c := Config{PrivateKey: k.String(), InterfaceName: DefaultInterface, WireguardPort: DefaultPort, MTU: DefaultMTU}
		return c, Save(path, c)
	}
	if err != nil {
		return Config{}, fmt.Errorf("read config %s: %w", path, err)
	}
	var c Config
	if err := json.Unmarshal(b, &c); err != nil {
		return Config{}, fmt.Errorf("config %s is corrupt: %w", path, err)
	}
	if _, err := key.ParsePrivate(c.PrivateKey); err != nil {
		return Config{}, fmt.Errorf("config %s: private key: %w", path, err)
	}
	if _, err := parseSSHKey(c.SSHKey); err != nil {
		return Config{}, fmt.Errorf("config %s: %w", path, err)
	}
	return c, nil
}

// Key returns the private key.
func (c Config) Key() key.Private {
	k, _ := key.ParsePrivate(c.PrivateKey)
	return k
}

// Save writes c atomically with mode 0600.
func Save(path string, c Config) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("create state directory: %w", err)
	}
	b, err := json.MarshalIndent(c, "", "  ")
	if err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return fmt.Errorf("write config: %w", err)
	}
	// A temporary file left by a crash keeps its old mode through
	// WriteFile; the profile holds private keys.
	if err := os.Chmod(tmp, 0o600); err != nil {
		return fmt.Errorf("write config: %w", err)
	}
	return os.Rename(tmp, path)
}
