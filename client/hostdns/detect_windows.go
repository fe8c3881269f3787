package hostdns

import "context"

func detect(context.Context, Options) ([]Mode, string) {
	return []Mode{ModeNRPT}, "Windows Name Resolution Policy Table"
}

func platformConfigurator(m Mode, o Options) configurator {
	if m != ModeNRPT {
		return nil
	}
	iface := o.Interface
	return &scriptConfigurator{m: m,
		argv:     []string{"powershell.exe", "-NoProfile", "-NonInteractive", "-Command", "-"},
		applyS:   func(c Config) string { return nrptApply(c, iface) },
		restoreS: nrptRestore(iface)}
}
