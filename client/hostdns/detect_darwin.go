package hostdns

import "context"

func detect(context.Context, Options) ([]Mode, string) {
	return []Mode{ModeScutil}, "macOS dynamic store (scutil)"
}

func platformConfigurator(m Mode, o Options) configurator {
	if m != ModeScutil {
		return nil
	}
	return &scriptConfigurator{m: m, argv: []string{"scutil"}, applyS: scutilApply, restoreS: scutilRestore()}
}
