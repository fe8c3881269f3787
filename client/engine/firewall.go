package engine

import (
	"log/slog"

	"github.com/wiremesh/wiremesh/client/acl"
	"github.com/wiremesh/wiremesh/client/nftfw"
)

// Firewalls (Options.Firewall).
const (
	FirewallUserspace = "userspace"
	FirewallNftables  = "nftables"
)

// ruleSetter enforces the map's firewall rules.
type ruleSetter interface {
	SetRules(rules []acl.Rule, allowAll bool)
	close()
}

type userspaceFirewall struct{ f *acl.Filter }

func (u userspaceFirewall) SetRules(rules []acl.Rule, allowAll bool) { u.f.SetRules(rules, allowAll) }
func (userspaceFirewall) close()                                     {}

type nftFirewall struct {
	f   *nftfw.Firewall
	log *slog.Logger
}

// SetRules keeps the last installed rules when the kernel refuses new
// ones: the table is replaced in one transaction or not at all.
func (n nftFirewall) SetRules(rules []acl.Rule, allowAll bool) {
	if err := n.f.SetRules(rules, allowAll); err != nil {
		n.log.Error("firewall rules not applied; the previous ones stay", "err", err)
	}
}

func (n nftFirewall) close() {
	if err := n.f.Close(); err != nil {
		n.log.Warn("remove the firewall table", "err", err)
	}
}
