/**
 * Human-readable descriptions of audit event codes (NetBird's dotted
 * activity codes, SPEC-rest.md section 13, plus this server's extensions).
 * An unknown code (a newer server) reads as the code itself.
 */

const descriptions: Record<string, string> = {
  // Peers
  "peer.user.add": "Peer added by a user login",
  "peer.setupkey.add": "Peer added with a setup key",
  "user.peer.delete": "Peer deleted",
  "peer.group.add": "Peer put in a group",
  "peer.group.delete": "Peer taken out of a group",
  "peer.ssh.enable": "SSH server of a peer turned on",
  "peer.ssh.disable": "SSH server of a peer turned off",
  "peer.rename": "Peer renamed",
  "peer.login.expiration.enable": "Login expiration turned on for a peer",
  "peer.login.expiration.disable": "Login expiration turned off for a peer",
  "user.peer.login": "Peer logged in by a user",
  "peer.login.expire": "Login of a peer expired",
  "peer.approve": "Peer approved",
  "peer.approval.revoke": "Approval of a peer revoked",
  "peer.inactivity.expiration.enable": "Inactivity expiration turned on for a peer",
  "peer.inactivity.expiration.disable": "Inactivity expiration turned off for a peer",
  "peer.ip.update": "Address of a peer changed",
  "peer.job.create": "Remote job started on a peer",
  "peer.ssh.session.start": "SSH session to a peer started",
  "peer.ssh.session.end": "SSH session to a peer ended",
  "peer.ssh.session.refused": "SSH access to a peer refused",
  "peer.ssh.events.dropped": "SSH events lost by a peer (its queue was full)",
  "peer.ssh.hostkey.mismatch": "SSH server of a peer presented a host key other than the network map's",
  // Users
  "user.join": "User joined the account",
  "user.invite": "User invited",
  "user.group.add": "Auto group given to a user",
  "user.group.delete": "Auto group taken from a user",
  "user.role.update": "Role of a user changed",
  "user.block": "User blocked",
  "user.unblock": "User unblocked",
  "user.delete": "User deleted",
  "user.approve": "User approved",
  "user.reject": "User rejected",
  "user.create": "User created",
  "user.password.change": "Password of a user changed",
  "service.user.create": "Service user created",
  "service.user.delete": "Service user deleted",
  "transferred.owner.role": "Ownership transferred",
  "dashboard.login": "User logged in to the dashboard",
  "user.invite.link.create": "Invite link created",
  "user.invite.link.accept": "Invite link used",
  "user.invite.link.regenerate": "Invite link renewed",
  "user.invite.link.delete": "Invite link deleted",
  // Tokens
  "personal.access.token.create": "Personal access token created",
  "personal.access.token.delete": "Personal access token deleted",
  // Account
  "account.create": "Account created",
  "account.delete": "Account deleted",
  "account.setting.peer.login.expiration.update": "Peer login expiration period changed",
  "account.setting.peer.login.expiration.enable": "Peer login expiration turned on",
  "account.setting.peer.login.expiration.disable": "Peer login expiration turned off",
  "account.setting.peer.approval.enable": "Peer approval turned on",
  "account.setting.peer.approval.disable": "Peer approval turned off",
  "account.peer.inactivity.expiration.enable": "Peer inactivity expiration turned on",
  "account.peer.inactivity.expiration.disable": "Peer inactivity expiration turned off",
  "account.peer.inactivity.expiration.update": "Peer inactivity expiration period changed",
  "account.setting.group.propagation.enable": "Groups propagation to peers turned on",
  "account.setting.group.propagation.disable": "Groups propagation to peers turned off",
  "account.setting.routing.peer.dns.resolution.enable": "DNS resolution on routing peers turned on",
  "account.setting.routing.peer.dns.resolution.disable": "DNS resolution on routing peers turned off",
  "account.dns.domain.update": "DNS domain of the account changed",
  "account.setting.lazy.connection.enable": "Lazy connections turned on",
  "account.setting.lazy.connection.disable": "Lazy connections turned off",
  "account.network.range.update": "Network range of the account changed",
  "account.settings.auto.version.update": "Client auto-update version changed",
  "account.setting.local.mfa.enable": "Second factor for local users turned on",
  "account.setting.local.mfa.disable": "Second factor for local users turned off",
  "account.setting.ipv6.enable": "IPv6 overlay turned on",
  "account.setting.ipv6.disable": "IPv6 overlay turned off",
  "account.domain.claim": "Domain claimed by the account",
  "account.settings.update": "Account settings changed",
  // Access control
  "rule.add": "Rule added",
  "rule.update": "Rule changed",
  "rule.delete": "Rule deleted",
  "policy.add": "Access policy added",
  "policy.update": "Access policy changed",
  "policy.delete": "Access policy deleted",
  "posture.check.create": "Posture check created",
  "posture.check.update": "Posture check changed",
  "posture.check.delete": "Posture check deleted",
  // Setup keys
  "setupkey.add": "Setup key created",
  "setupkey.update": "Setup key changed",
  "setupkey.revoke": "Setup key revoked",
  "setupkey.overuse": "Setup key used past its limit",
  "setupkey.delete": "Setup key deleted",
  "setupkey.group.add": "Auto group added to a setup key",
  "setupkey.group.delete": "Auto group removed from a setup key",
  // Groups
  "group.add": "Group created",
  "group.update": "Group changed",
  "group.delete": "Group deleted",
  "resource.group.add": "Resource put in a group",
  "resource.group.delete": "Resource taken out of a group",
  // DNS
  "dns.setting.disabled.management.group.add": "Group exempted from DNS management",
  "dns.setting.disabled.management.group.delete": "Group no longer exempted from DNS management",
  "nameserver.group.add": "Nameserver group created",
  "nameserver.group.delete": "Nameserver group deleted",
  "nameserver.group.update": "Nameserver group changed",
  "dns.zone.create": "DNS zone created",
  "dns.zone.update": "DNS zone changed",
  "dns.zone.delete": "DNS zone deleted",
  "dns.zone.record.create": "DNS record created",
  "dns.zone.record.update": "DNS record changed",
  "dns.zone.record.delete": "DNS record deleted",
  // Routes and networks
  "route.add": "Route created",
  "route.delete": "Route deleted",
  "route.update": "Route changed",
  "network.create": "Network created",
  "network.update": "Network changed",
  "network.delete": "Network deleted",
  "network.resource.create": "Network resource created",
  "network.resource.update": "Network resource changed",
  "network.resource.delete": "Network resource deleted",
  "network.router.create": "Network router created",
  "network.router.update": "Network router changed",
  "network.router.delete": "Network router deleted",
  // Integrations
  "integration.create": "Integration created",
  "integration.update": "Integration changed",
  "integration.delete": "Integration deleted",
  "identityprovider.create": "Identity provider added",
  "identityprovider.update": "Identity provider changed",
  "identityprovider.delete": "Identity provider removed",
  "service.create": "Service created",
  "service.update": "Service changed",
  "service.delete": "Service deleted",
};

/** The description of an activity code; an unknown code reads as itself. */
export function describeCode(code: string): string {
  return Object.hasOwn(descriptions, code) ? (descriptions[code] as string) : code;
}

/** Every code with a description, for the filter's choices. */
export function knownCodes(): string[] {
  return Object.keys(descriptions);
}

/** The area of a code, for grouping in the filter ("peer", "user", "account"...). */
export function areaOf(code: string): string {
  const head = code.split(".")[0] ?? code;
  const areas: Record<string, string> = {
    peer: "Peers",
    user: "Users",
    service: "Users",
    transferred: "Users",
    dashboard: "Users",
    personal: "Tokens",
    account: "Account",
    rule: "Access control",
    policy: "Access control",
    posture: "Access control",
    setupkey: "Setup keys",
    group: "Groups",
    resource: "Groups",
    dns: "DNS",
    nameserver: "DNS",
    route: "Networks",
    network: "Networks",
    integration: "Integrations",
    identityprovider: "Integrations",
  };
  if (code.startsWith("user.peer.")) return "Peers";
  if (code.startsWith("service.user.")) return "Users";
  if (code === "service.create" || code === "service.update" || code === "service.delete") return "Integrations";
  return areas[head] ?? "Other";
}
