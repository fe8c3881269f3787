// Package nftfw enforces the network map's firewall rules with nftables
// on the WireGuard interface, for interfaces whose packets do not pass
// through the agent (kernel WireGuard), or by choice (NB_FIREWALL=nftables)
// on the userspace one. It has the semantics of package acl: packets from
// peers reach the host (or are forwarded) only when an inbound rule
// accepts them, they belong to a connection the host opened, or they go
// to a port open to every map peer (acl.Services); what the
// host sends is allowed unless an outbound drop rule matches.
package nftfw
