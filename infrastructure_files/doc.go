// Package infrastructure holds no code: its tests check the deployment
// files beside them (getting-started.sh, the systemd unit, the Caddyfiles,
// the compose files and Dockerfiles) and every shell script of the
// repository, the way the tools that use them would read them.
package infrastructure
