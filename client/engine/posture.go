package engine

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/wiremesh/wiremesh/proto/mgmtpb"
)

// Posture checks: management lists files (processes) in SyncResponse.Checks
// and the agent answers in its metadata, through SyncMeta, whether each
// exists and runs. Answers are refreshed every minute while asked for.

// fileStates answers for paths.
func fileStates(paths []string) []*mgmtpb.File {
	running := runningExecutables()
	out := make([]*mgmtpb.File, 0, len(paths))
	for _, p := range paths {
		_, err := os.Stat(p)
		out = append(out, &mgmtpb.File{Path: p, Exist: err == nil, ProcessIsRunning: running[filepath.Clean(p)]})
	}
	return out
}

// runningExecutables lists the executables of running processes (Linux:
// /proc/*/exe; elsewhere none is known, so process checks fail closed).
func runningExecutables() map[string]bool {
	out := map[string]bool{}
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return out
	}
	for _, e := range ents {
		if !e.IsDir() || strings.TrimLeft(e.Name(), "0123456789") != "" {
			continue
		}
		if exe, err := os.Readlink(filepath.Join("/proc", e.Name(), "exe")); err == nil {
			out[strings.TrimSuffix(exe, " (deleted)")] = true
		}
	}
	return out
}

// interfaceAddresses lists this host's addresses (network-range checks).
func interfaceAddresses() []*mgmtpb.NetworkAddress {
	ifs, err := net.Interfaces()
	if err != nil {
		return nil
	}
	var out []*mgmtpb.NetworkAddress
	for _, ifc := range ifs {
		if ifc.Flags&net.FlagLoopback != 0 || ifc.Flags&net.FlagUp == 0 {
			continue
		}
		addrs, _ := ifc.Addrs()
		for _, a := range addrs {
			out = append(out, &mgmtpb.NetworkAddress{NetIP: a.String(), Mac: ifc.HardwareAddr.String()})
		}
	}
	return out
}

// wantChecks hands the files of a sync response to the reporter.
func (e *Engine) wantChecks(r *mgmtpb.SyncResponse) {
	var paths []string
	for _, c := range r.GetChecks() {
		paths = append(paths, c.GetFiles()...)
	}
	if len(paths) == 0 && r.GetNetworkMap() == nil {
		return // a config refresh, not a statement about checks
	}
	select {
	case e.checks <- paths:
	default:
		// The reporter has not taken the previous list yet: replace it.
		select {
		case <-e.checks:
		default:
		}
		select {
		case e.checks <- paths:
		default:
		}
	}
}

// reportChecks answers posture checks until ctx ends.
func (e *Engine) reportChecks(ctx context.Context) {
	var paths []string
	var last []*mgmtpb.File
	t := time.NewTicker(time.Minute)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case p := <-e.checks:
			if slices.Equal(p, paths) {
				continue
			}
			paths, last = p, nil
		case <-t.C:
		}
		if len(paths) == 0 {
			continue
		}
		files := fileStates(paths)
		if last != nil && slices.EqualFunc(files, last, func(a, b *mgmtpb.File) bool { return proto.Equal(a, b) }) {
			continue
		}
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		// Connection reports carry them too; sent under the lock that
		// orders all metadata sends (metaFiles).
		if err := e.files.sendFiles(cctx, e.mgmt.SyncMeta, e.meta, files); err != nil {
			e.log.Warn("posture check report", "err", err)
		} else {
			last = files
		}
		cancel()
	}
}
