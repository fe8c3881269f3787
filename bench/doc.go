// Package bench measures the agent against baselines taken in the same run
// (plain wireguard-go, the bare path) and prints ratios: time from `netbird
// up` to the first ping reply, P2P and relayed TCP throughput, idle memory
// and CPU per Gbit/s, SSH session setup and copy throughput beside the
// tunnel's own TCP (ssh_test.go). Run it with `bash bench/run.sh` (root
// needed); it is skipped in the normal test run.
package bench
