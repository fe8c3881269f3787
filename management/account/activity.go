package account

import (
	"fmt"
	"strconv"
)

// Activity codes are the wire values of an event's activity_code: NetBird's
// codes (SPEC-rest.md section 13), so the dashboard renders our events.
// Every code management records is listed in Activities; a test walks the
// sources for codes that are not.

// Activities maps each activity code to the text of the event's activity
// field.
var Activities = map[string]string{
	// Peers.
	"peer.user.add":                      "Peer added by a user",
	"peer.setupkey.add":                  "Peer added with a setup key",
	"user.peer.delete":                   "Peer deleted",
	"peer.group.add":                     "Peer added to a group",
	"peer.group.delete":                  "Peer removed from a group",
	"peer.ssh.enable":                    "Peer SSH server enabled",
	"peer.ssh.disable":                   "Peer SSH server disabled",
	"peer.rename":                        "Peer renamed",
	"peer.login.expiration.enable":       "Peer login expiration enabled",
	"peer.login.expiration.disable":      "Peer login expiration disabled",
	"user.peer.login":                    "User logged in a peer",
	"peer.login.expire":                  "Peer login expired",
	"peer.approve":                       "Peer approved",
	"peer.approval.revoke":               "Peer approval revoked",
	"peer.inactivity.expiration.enable":  "Peer inactivity expiration enabled",
	"peer.inactivity.expiration.disable": "Peer inactivity expiration disabled",
	"peer.ip.update":                     "Peer IP address changed",
	"peer.job.create":                    "Peer job created",
	// Users.
	"user.join":                   "User joined",
	"user.invite":                 "User invited",
	"user.group.add":              "Group added to a user's auto groups",
	"user.group.delete":           "Group removed from a user's auto groups",
	"user.role.update":            "User role changed",
	"user.block":                  "User blocked",
	"user.unblock":                "User unblocked",
	"user.delete":                 "User deleted",
	"user.approve":                "User approved",
	"user.reject":                 "User rejected",
	"user.create":                 "User created",
	"user.password.change":        "User password changed",
	"service.user.create":         "Service user created",
	"service.user.delete":         "Service user deleted",
	"transferred.owner.role":      "Owner role transferred",
	"dashboard.login":             "User logged in to the dashboard",
	"user.invite.link.create":     "Invite link created",
	"user.invite.link.accept":     "Invite link accepted",
	"user.invite.link.regenerate": "Invite link regenerated",
	"user.invite.link.delete":     "Invite link deleted",
	// Tokens.
	"personal.access.token.create": "Personal access token created",
	"personal.access.token.delete": "Personal access token deleted",
	// Account.
	"account.create": "Account created",
	"account.delete": "Account deleted",
	"account.setting.peer.login.expiration.update":        "Peer login expiration period changed",
	"account.setting.peer.login.expiration.enable":        "Peer login expiration enabled for the account",
	"account.setting.peer.login.expiration.disable":       "Peer login expiration disabled for the account",
	"account.setting.peer.approval.enable":                "Peer approval enabled for the account",
	"account.setting.peer.approval.disable":               "Peer approval disabled for the account",
	"account.peer.inactivity.expiration.enable":           "Peer inactivity expiration enabled for the account",
	"account.peer.inactivity.expiration.disable":          "Peer inactivity expiration disabled for the account",
	"account.peer.inactivity.expiration.update":           "Peer inactivity expiration period changed",
	"account.setting.group.propagation.enable":            "User groups propagation to peers enabled",
	"account.setting.group.propagation.disable":           "User groups propagation to peers disabled",
	"account.setting.routing.peer.dns.resolution.enable":  "Routing peer DNS resolution enabled",
	"account.setting.routing.peer.dns.resolution.disable": "Routing peer DNS resolution disabled",
	"account.dns.domain.update":                           "Account DNS domain changed",
	"account.setting.lazy.connection.enable":              "Lazy connections enabled",
	"account.setting.lazy.connection.disable":             "Lazy connections disabled",
	"account.network.range.update":                        "Account network range changed",
	"account.settings.auto.version.update":                "Automatic client update version changed",
	// Newer than SPEC-rest.md's list, NetBird's own codes.
	"account.setting.local.mfa.enable":  "Local users' MFA enabled",
	"account.setting.local.mfa.disable": "Local users' MFA disabled",
	"account.setting.ipv6.enable":       "Account IPv6 overlay enabled",
	"account.setting.ipv6.disable":      "Account IPv6 overlay disabled",
	// Policies and rules.
	"rule.add": "Rule added", "rule.update": "Rule updated", "rule.delete": "Rule deleted",
	"policy.add": "Policy added", "policy.update": "Policy updated", "policy.delete": "Policy deleted",
	// Setup keys.
	"setupkey.add":          "Setup key created",
	"setupkey.update":       "Setup key updated",
	"setupkey.revoke":       "Setup key revoked",
	"setupkey.overuse":      "Setup key used beyond its limit",
	"setupkey.delete":       "Setup key deleted",
	"setupkey.group.add":    "Group added to a setup key",
	"setupkey.group.delete": "Group removed from a setup key",
	// Groups.
	"group.add": "Group created", "group.update": "Group updated", "group.delete": "Group deleted",
	"resource.group.add":    "Group added to a resource",
	"resource.group.delete": "Group removed from a resource",
	// DNS.
	"dns.setting.disabled.management.group.add":    "Group added to the DNS management exceptions",
	"dns.setting.disabled.management.group.delete": "Group removed from the DNS management exceptions",
	"nameserver.group.add":                         "Nameserver group created",
	"nameserver.group.delete":                      "Nameserver group deleted",
	"nameserver.group.update":                      "Nameserver group updated",
	"dns.zone.create":                              "DNS zone created",
	"dns.zone.update":                              "DNS zone updated",
	"dns.zone.delete":                              "DNS zone deleted",
	"dns.zone.record.create":                       "DNS record created",
	"dns.zone.record.update":                       "DNS record updated",
	"dns.zone.record.delete":                       "DNS record deleted",
	// Routes and networks.
	"route.add": "Route created", "route.delete": "Route deleted", "route.update": "Route updated",
	"network.create": "Network created", "network.update": "Network updated", "network.delete": "Network deleted",
	"network.resource.create": "Network resource created",
	"network.resource.update": "Network resource updated",
	"network.resource.delete": "Network resource deleted",
	"network.router.create":   "Network router created",
	"network.router.update":   "Network router updated",
	"network.router.delete":   "Network router deleted",
	// Posture checks.
	"posture.check.create": "Posture check created",
	"posture.check.update": "Posture check updated",
	"posture.check.delete": "Posture check deleted",
	// Integrations, identity providers, services.
	"integration.create": "Integration created", "integration.update": "Integration updated", "integration.delete": "Integration deleted",
	"identityprovider.create": "Identity provider created",
	"identityprovider.update": "Identity provider updated",
	"identityprovider.delete": "Identity provider deleted",
	"service.create":          "Service created", "service.update": "Service updated", "service.delete": "Service deleted",

	// Extensions (not in NetBird's list; clients accept unknown codes).
	"account.domain.claim":    "Account domain claimed",
	"account.settings.update": "Account settings changed",
	// SSH access reported by our agents (management/sshaudit).
	"peer.ssh.session.start":    "SSH session started",
	"peer.ssh.session.end":      "SSH session ended",
	"peer.ssh.session.refused":  "SSH access refused",
	"peer.ssh.events.dropped":   "SSH events lost by a peer",
	"peer.ssh.hostkey.mismatch": "SSH host key mismatch",
}

// ActivityText is the human-readable activity of a code; an unknown code
// (from a newer version sharing the store) reads as itself.
func ActivityText(code string) string {
	if t, ok := Activities[code]; ok {
		return t
	}
	return code
}

// SettingEvent is one recorded change of account settings.
type SettingEvent struct {
	Activity string
	Meta     map[string]string
}

// SettingsEvents names the changes from old to cur with NetBird's codes,
// one event per switch or period that changed. Changes without a code of
// their own (JWT groups, user approval, regular users' view) are listed
// together in one account.settings.update event.
func SettingsEvents(old, cur Settings) []SettingEvent {
	var out []SettingEvent
	toggle := func(was, is bool, prefix string) {
		switch {
		case !was && is:
			out = append(out, SettingEvent{Activity: prefix + ".enable", Meta: map[string]string{}})
		case was && !is:
			out = append(out, SettingEvent{Activity: prefix + ".disable", Meta: map[string]string{}})
		}
	}
	period := func(was, is int64, code string) {
		if was != is {
			out = append(out, SettingEvent{Activity: code, Meta: map[string]string{"old": strconv.FormatInt(was, 10), "new": strconv.FormatInt(is, 10)}})
		}
	}
	toggle(old.PeerLoginExpirationEnabled, cur.PeerLoginExpirationEnabled, "account.setting.peer.login.expiration")
	period(old.PeerLoginExpiration, cur.PeerLoginExpiration, "account.setting.peer.login.expiration.update")
	toggle(old.PeerInactivityExpirationEnabled, cur.PeerInactivityExpirationEnabled, "account.peer.inactivity.expiration")
	period(old.PeerInactivityExpiration, cur.PeerInactivityExpiration, "account.peer.inactivity.expiration.update")
	toggle(old.Extra.PeerApprovalEnabled, cur.Extra.PeerApprovalEnabled, "account.setting.peer.approval")
	toggle(old.GroupsPropagationEnabled, cur.GroupsPropagationEnabled, "account.setting.group.propagation")
	toggle(old.RoutingPeerDNSResolutionEnabled, cur.RoutingPeerDNSResolutionEnabled, "account.setting.routing.peer.dns.resolution")
	toggle(old.LazyConnectionEnabled, cur.LazyConnectionEnabled, "account.setting.lazy.connection")
	toggle(old.LocalMFAEnabled, cur.LocalMFAEnabled, "account.setting.local.mfa")
	// As NetBird: the overlay is on while any group is enabled.
	toggle(len(old.IPv6EnabledGroups) > 0, len(cur.IPv6EnabledGroups) > 0, "account.setting.ipv6")
	rest := map[string]string{}
	note := func(changed bool, field string, v any) {
		if changed {
			rest[field] = fmt.Sprint(v)
		}
	}
	note(old.JWTGroupsEnabled != cur.JWTGroupsEnabled, "jwt_groups_enabled", cur.JWTGroupsEnabled)
	note(old.JWTGroupsClaimName != cur.JWTGroupsClaimName, "jwt_groups_claim_name", cur.JWTGroupsClaimName)
	note(fmt.Sprint(old.JWTAllowGroups) != fmt.Sprint(cur.JWTAllowGroups), "jwt_allow_groups", cur.JWTAllowGroups)
	note(old.RegularUsersViewBlocked != cur.RegularUsersViewBlocked, "regular_users_view_blocked", cur.RegularUsersViewBlocked)
	note(old.Extra.UserApprovalRequired != cur.Extra.UserApprovalRequired, "user_approval_required", cur.Extra.UserApprovalRequired)
	note(len(old.IPv6EnabledGroups) > 0 && len(cur.IPv6EnabledGroups) > 0 && fmt.Sprint(old.IPv6EnabledGroups) != fmt.Sprint(cur.IPv6EnabledGroups),
		"ipv6_enabled_groups", cur.IPv6EnabledGroups)
	if len(rest) > 0 {
		out = append(out, SettingEvent{Activity: "account.settings.update", Meta: rest})
	}
	return out
}
