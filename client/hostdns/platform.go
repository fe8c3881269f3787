package hostdns

import (
	"bytes"
	"context"
	"fmt"
	"net/netip"
	"os/exec"
	"strings"
)

// macOS: the agent's resolver is published as supplemental resolvers in
// the dynamic store (scutil), one key for search domains and one for
// match-only domains; with a primary group, a key whose match domains
// include the root takes every query. Removing the keys is the restore.
const (
	scutilSearchKey = "State:/Network/Service/NetBird-Search/DNS"
	scutilMatchKey  = "State:/Network/Service/NetBird-Match/DNS"
	scutilAllKey    = "State:/Network/Service/NetBird-All/DNS"
)

// scutilApply is the scutil input for c.
func scutilApply(c Config) string {
	var search, match []string
	for _, d := range c.Domains {
		if n := trimDot(d.Name); n != "" {
			if d.MatchOnly {
				match = append(match, n)
			} else {
				search = append(search, n)
			}
		}
	}
	var b strings.Builder
	b.WriteString("open\n")
	key := func(name string, doms []string, isSearch bool) {
		if len(doms) == 0 {
			fmt.Fprintf(&b, "remove %s\n", name)
			return
		}
		b.WriteString("d.init\n")
		fmt.Fprintf(&b, "d.add ServerAddresses * %s\n", c.Server.Addr())
		fmt.Fprintf(&b, "d.add ServerPort # %d\n", c.Server.Port())
		fmt.Fprintf(&b, "d.add SupplementalMatchDomains * %s\n", strings.Join(doms, " "))
		if isSearch {
			fmt.Fprintf(&b, "d.add SearchDomains * %s\n", strings.Join(doms, " "))
			b.WriteString("d.add SupplementalMatchDomainsNoSearch # 0\n")
		} else {
			b.WriteString("d.add SupplementalMatchDomainsNoSearch # 1\n")
		}
		fmt.Fprintf(&b, "set %s\n", name)
	}
	key(scutilSearchKey, search, true)
	key(scutilMatchKey, match, false)
	if c.RouteAll {
		// An empty match domain is the default resolver.
		key(scutilAllKey, []string{`""`}, false)
	} else {
		fmt.Fprintf(&b, "remove %s\n", scutilAllKey)
	}
	b.WriteString("quit\n")
	return b.String()
}

// scutilRestore removes every key the agent sets.
func scutilRestore() string {
	return "open\nremove " + scutilSearchKey + "\nremove " + scutilMatchKey + "\nremove " + scutilAllKey + "\nquit\n"
}

// Windows: one Name Resolution Policy Table rule per domain (and one for
// "." with a primary group), sending it to the agent's resolver, each
// tagged with nrptComment so the restore removes exactly the agent's.
// Search domains go on the overlay adapter's suffix search list.
const nrptComment = "netbird-wiremesh"

func psQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

// nrptApply is the PowerShell for c on the adapter iface.
func nrptApply(c Config, iface string) string {
	var b strings.Builder
	b.WriteString("$ErrorActionPreference = 'Stop'\n")
	b.WriteString(nrptRestore(iface))
	var search []string
	for _, d := range c.Domains {
		n := trimDot(d.Name)
		if n == "" {
			continue
		}
		fmt.Fprintf(&b, "Add-DnsClientNrptRule -Namespace %s -NameServers %s -Comment %s\n", psQuote("."+n), psQuote(c.Server.Addr().String()), psQuote(nrptComment))
		if !d.MatchOnly {
			search = append(search, psQuote(n))
		}
	}
	if c.RouteAll {
		fmt.Fprintf(&b, "Add-DnsClientNrptRule -Namespace '.' -NameServers %s -Comment %s\n", psQuote(c.Server.Addr().String()), psQuote(nrptComment))
	}
	if len(search) > 0 {
		fmt.Fprintf(&b, "Set-DnsClient -InterfaceAlias %s -ConnectionSpecificSuffix %s\n", psQuote(iface), search[0])
		fmt.Fprintf(&b, "$l = @((Get-DnsClientGlobalSetting).SuffixSearchList | Where-Object { @(%s) -notcontains $_ }); Set-DnsClientGlobalSetting -SuffixSearchList (@(%s) + $l)\n",
			strings.Join(search, ","), strings.Join(search, ","))
	}
	b.WriteString("Clear-DnsClientCache\n")
	return b.String()
}

// nrptRestore removes the agent's rules and its adapter's suffix.
func nrptRestore(iface string) string {
	return fmt.Sprintf("Get-DnsClientNrptRule | Where-Object { $_.Comment -eq %s } | ForEach-Object { Remove-DnsClientNrptRule -Name $_.Name -Force }\n"+
		"Set-DnsClient -InterfaceAlias %s -ResetConnectionSpecificSuffix -ErrorAction SilentlyContinue\n", psQuote(nrptComment), psQuote(iface))
}

// scriptConfigurator applies generated scripts with a system tool (scutil,
// PowerShell).
type scriptConfigurator struct {
	m        Mode
	argv     []string // the tool; the script goes to its stdin
	applyS   func(Config) string
	restoreS string
}

func (s *scriptConfigurator) mode() Mode { return s.m }

func (s *scriptConfigurator) run(ctx context.Context, script string) error {
	cmd := exec.CommandContext(ctx, s.argv[0], s.argv[1:]...)
	cmd.Stdin = strings.NewReader(script)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s: %w: %s", s.argv[0], err, strings.TrimSpace(out.String()))
	}
	return nil
}

func (s *scriptConfigurator) apply(ctx context.Context, c Config) error {
	return s.run(ctx, s.applyS(c))
}

func (s *scriptConfigurator) restore(ctx context.Context) error { return s.run(ctx, s.restoreS) }

// upstreams: the OS keeps its own servers for everything else.
func (s *scriptConfigurator) upstreams(context.Context) []netip.AddrPort { return nil }
