// Command plainwg is the benchmarks' baseline: a plain wireguard-go tunnel
// (standard bind, no ICE, no management) with one statically configured
// peer, so the agent's tunnel can be compared with it in the same run.
package main

import (
	"encoding/hex"
	"flag"
	"fmt"
	"net/netip"
	"os"
	"os/signal"
	"syscall"

	"github.com/vishvananda/netlink"
	"golang.zx2c4.com/wireguard/conn"
	"golang.zx2c4.com/wireguard/device"
	"golang.zx2c4.com/wireguard/tun"

	"github.com/wiremesh/wiremesh/internal/key"
)

func main() {
	var name, priv, peer, endpoint, addr, allowed string
	var port int
	flag.StringVar(&name, "iface", "", "interface name")
	flag.StringVar(&priv, "private", "", "private key (base64)")
	flag.StringVar(&peer, "peer", "", "peer public key (base64)")
	flag.StringVar(&endpoint, "endpoint", "", "peer endpoint ip:port")
	flag.StringVar(&addr, "addr", "", "interface address (CIDR)")
	flag.StringVar(&allowed, "allowed", "", "peer allowed IP (CIDR)")
	flag.IntVar(&port, "port", 51820, "listen port")
	flag.Parse()
	if err := run(name, priv, peer, endpoint, addr, allowed, port); err != nil {
		fmt.Fprintln(os.Stderr, "plainwg:", err)
		os.Exit(1)
	}
}

func run(name, priv, peer, endpoint, addr, allowed string, port int) error {
	sk, err := key.ParsePrivate(priv)
	if err != nil {
		return err
	}
	pk, err := key.ParsePublic(peer)
	if err != nil {
		return err
	}
	t, err := tun.CreateTUN(name, 1280)
	if err != nil {
		return err
	}
	dev := device.NewDevice(t, conn.NewStdNetBind(), device.NewLogger(device.LogLevelError, ""))
	defer dev.Close()
	cfg := fmt.Sprintf("private_key=%s\nlisten_port=%d\npublic_key=%s\nendpoint=%s\nallowed_ip=%s\npersistent_keepalive_interval=1\n",
		hex.EncodeToString(sk[:]), port, hex.EncodeToString(pk[:]), endpoint, allowed)
	if err := dev.IpcSet(cfg); err != nil {
		return err
	}
	if err := dev.Up(); err != nil {
		return err
	}
	link, err := netlink.LinkByName(name)
	if err != nil {
		return err
	}
	p, err := netip.ParsePrefix(addr)
	if err != nil {
		return err
	}
	a, _ := netlink.ParseAddr(p.String())
	if err := netlink.AddrAdd(link, a); err != nil {
		return err
	}
	if err := netlink.LinkSetUp(link); err != nil {
		return err
	}
	fmt.Println("plainwg up")
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, os.Interrupt, syscall.SIGTERM)
	<-ch
	return nil
}
