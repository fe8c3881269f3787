//go:build !linux && !darwin && !windows

package hostdns

import "context"

func detect(context.Context, Options) ([]Mode, string) {
	return nil, "no host DNS integration on this system"
}

func platformConfigurator(Mode, Options) configurator { return nil }
