package hostdns

import (
	"context"
	"io/fs"
	"os"
)

const nsswitchPath = "/etc/nsswitch.conf"

func detect(ctx context.Context, o Options) ([]Mode, string) {
	path := o.ResolvConf.Path
	if path == "" {
		path = "/etc/resolv.conf"
	}
	f := hostFacts{HaveResolvConf: o.ResolvConf.Path != "", HaveHosts: o.HostsPath != ""}
	if fi, err := os.Lstat(path); err == nil && fi.Mode()&fs.ModeSymlink != 0 {
		f.ResolvConfLink, _ = os.Readlink(path)
		if f.ResolvConfLink == "" {
			f.ResolvConfLink = "?"
		}
	}
	// The agent's own rewrite left by a crash says nothing about the
	// host: its backup is what the host had.
	if b, err := o.ResolvConf.Original(); err == nil && o.ResolvConf.Path != "" {
		f.ResolvConf = b
	} else {
		f.ResolvConf, _ = os.ReadFile(path)
	}
	f.Nsswitch, _ = os.ReadFile(nsswitchPath)
	f.Resolved = onBus(ctx, o.Bus, resolvedDest)
	f.NetworkManager = onBus(ctx, o.Bus, nmDest)
	return chooseModes(f)
}

func platformConfigurator(Mode, Options) configurator { return nil }
