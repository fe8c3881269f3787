// Package e2e holds end-to-end tests and their helpers (also used by the
// benchmarks): real server and agent processes in
// network namespaces behind NAT routers, with real TUN devices and real
// traffic through the tunnels.
package e2e
