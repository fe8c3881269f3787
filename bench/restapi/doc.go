// Package restapi benchmarks the REST API's list endpoints on a large
// account (10,000 peers, 1,000 groups, 1,000 policies by default) against
// NetBird's own management server, seeded with the same dataset and
// measured in the same run over real HTTP with a personal access token. It
// prints p50/p99/max per endpoint and the ratio to the baseline, never a
// timed assertion. Run it with `bash bench/restapi.sh`; it is skipped in
// the normal test run (WIREMESH_BENCH=1 enables it).
//
// Two helpers for working on one endpoint: TestProfileRESTAPI
// (WIREMESH_BENCH_PROFILE=dir) takes CPU and allocation profiles and a GC
// trace of our server under that load, with the time to the first byte;
// TestABRESTAPI (WIREMESH_BENCH_AB_BIN=another netbird-server) calls this
// tree's server and another build in turn, so that both meet the same
// noise from the rest of a shared machine.
package restapi
