package httpapi

import (
	"encoding/json"
	"net/http"
	"strconv"
)

// A hand-written encoder for the peer list, the API's largest answer (a
// peer is about 1 KB of JSON): it writes exactly what encoding/json
// writes for []peerJSON (TestPeerJSONMatchesEncodingJSON), without
// reflection.

// writePeers answers 200 with the peers, as ok would.
func writePeers(w http.ResponseWriter, ps []peerJSON) error {
	return writeRaw(w, appendPeers(make([]byte, 0, 1024*len(ps)+3), ps))
}

// writeRaw answers 200 with encoded JSON (ending in a newline, as
// json.Encoder writes it).
func writeRaw(w http.ResponseWriter, b []byte) error {
	w.Header().Set("Content-Type", "application/json; charset=UTF-8")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(b)
	return nil
}

// appendPeers appends ps as json.Encoder.Encode writes them (with its
// trailing newline).
func appendPeers(b []byte, ps []peerJSON) []byte {
	b = append(b, '[')
	for i := range ps {
		if i > 0 {
			b = append(b, ',')
		}
		b = ps[i].appendJSON(b)
	}
	return append(b, ']', '\n')
}

func (p *peerJSON) appendJSON(b []byte) []byte {
	b = p.appendHead(b)
	b = appendBool(b, `,"connected":`, p.Connected)
	b = appendField(b, `,"last_seen":`, p.LastSeen)
	b = p.appendMiddle(b)
	b = appendBool(b, `,"login_expired":`, p.LoginExpired)
	b = p.appendTail(b)
	if p.AccessiblePeersCount != nil {
		b = strconv.AppendInt(append(b, `,"accessible_peers_count":`...), int64(*p.AccessiblePeersCount), 10)
	}
	return append(appendConns(b, p.Connections, p.PeerConnections), '}')
}

// A peer's JSON in parts, around the fields that change without a new
// serial or view revision (connected, last_seen, login_expired,
// accessible_peers_count): the head up to connection_ip, the middle from
// os to login_expiration_enabled, the tail from last_login to local_flags.

func (p *peerJSON) appendHead(b []byte) []byte {
	b = appendField(b, `{"id":`, p.ID)
	b = appendField(b, `,"name":`, p.Name)
	b = appendField(b, `,"created_at":`, p.CreatedAt)
	b = appendField(b, `,"ip":`, p.IP)
	if p.IPv6 != "" { // omitempty
		b = appendField(b, `,"ipv6":`, p.IPv6)
	}
	return appendField(b, `,"connection_ip":`, p.ConnectionIP)
}

func (p *peerJSON) appendMiddle(b []byte) []byte {
	b = appendField(b, `,"os":`, p.OS)
	b = appendField(b, `,"kernel_version":`, p.KernelVersion)
	b = strconv.AppendInt(append(b, `,"geoname_id":`...), int64(p.GeonameID), 10)
	b = appendField(b, `,"version":`, p.Version)
	b = appendField(b, `,"ui_version":`, p.UIVersion)
	b = append(b, `,"groups":`...)
	if p.Groups == nil {
		b = append(b, "null"...)
	} else {
		b = append(b, '[')
		for i, g := range p.Groups {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendField(b, `{"id":`, g.ID)
			b = appendField(b, `,"name":`, g.Name)
			b = strconv.AppendInt(append(b, `,"peers_count":`...), int64(g.PeersCount), 10)
			b = strconv.AppendInt(append(b, `,"resources_count":`...), int64(g.ResourcesCount), 10)
			b = append(b, '}')
		}
		b = append(b, ']')
	}
	b = appendBool(b, `,"ssh_enabled":`, p.SSHEnabled)
	b = appendField(b, `,"user_id":`, p.UserID)
	b = appendField(b, `,"hostname":`, p.Hostname)
	b = appendField(b, `,"dns_label":`, p.DNSLabel)
	return appendBool(b, `,"login_expiration_enabled":`, p.LoginExpirationEnabled)
}

func (p *peerJSON) appendTail(b []byte) []byte {
	b = appendField(b, `,"last_login":`, p.LastLogin)
	b = appendBool(b, `,"inactivity_expiration_enabled":`, p.InactivityExpirationEnabled)
	b = appendBool(b, `,"approval_required":`, p.ApprovalRequired)
	b = appendField(b, `,"country_code":`, p.CountryCode)
	b = appendField(b, `,"city_name":`, p.CityName)
	b = appendField(b, `,"serial_number":`, p.SerialNumber)
	b = append(b, `,"extra_dns_labels":`...)
	if p.ExtraDNSLabels == nil {
		b = append(b, "null"...)
	} else {
		b = append(b, '[')
		for i, l := range p.ExtraDNSLabels {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendString(b, l)
		}
		b = append(b, ']')
	}
	b = appendBool(b, `,"ephemeral":`, p.Ephemeral)
	return p.LocalFlags.appendJSON(append(b, `,"local_flags":`...))
}

func (f localFlagsJSON) appendJSON(b []byte) []byte {
	b = appendBool(b, `{"rosenpass_enabled":`, f.RosenpassEnabled)
	b = appendBool(b, `,"rosenpass_permissive":`, f.RosenpassPermissive)
	b = appendBool(b, `,"server_ssh_allowed":`, f.ServerSSHAllowed)
	b = appendBool(b, `,"disable_client_routes":`, f.DisableClientRoutes)
	b = appendBool(b, `,"disable_server_routes":`, f.DisableServerRoutes)
	b = appendBool(b, `,"disable_dns":`, f.DisableDNS)
	b = appendBool(b, `,"disable_firewall":`, f.DisableFirewall)
	b = appendBool(b, `,"block_lan_access":`, f.BlockLANAccess)
	b = appendBool(b, `,"block_inbound":`, f.BlockInbound)
	b = appendBool(b, `,"lazy_connection_enabled":`, f.LazyConnectionEnabled)
	return append(b, '}')
}

func appendField(b []byte, key, v string) []byte { return appendString(append(b, key...), v) }

func appendBool(b []byte, key string, v bool) []byte {
	return strconv.AppendBool(append(b, key...), v)
}

// appendString quotes s as encoding/json does (HTML-safe): printable
// ASCII other than the characters it escapes is copied, anything else
// goes through encoding/json itself.
func appendString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < 0x20 || c >= 0x7f || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			q, _ := json.Marshal(s)
			return append(b, q...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}
