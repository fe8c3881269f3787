// Package e2e holds end-to-end tests: real server and agent processes in
// network namespaces behind NAT routers, with real TUN devices and real
// traffic through the tunnels. It has no code of its own.
package e2e
