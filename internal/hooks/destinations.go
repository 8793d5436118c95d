package hooks

import (
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"strings"
	"syscall"
)

// DefaultDeniedDestinations are the address ranges hooks may not be called
// at unless the operator says otherwise: link-local addresses (IPv4 and
// IPv6), where clouds serve instance metadata and credentials, and the
// metadata addresses clouds serve elsewhere (AWS's IPv6 one, Alibaba's). A
// controller's author chooses its hook URLs, and the server would fetch
// them with its own network position.
var DefaultDeniedDestinations = []string{"169.254.0.0/16", "fe80::/10", "fd00:ec2::254/128", "100.100.100.200/32"}

// Destinations are the address ranges hooks may not be called at.
type Destinations struct {
	denied []netip.Prefix
}

// ParseDestinations reads CIDRs (or single addresses); empty strings are
// skipped, so that an operator can deny nothing.
func ParseDestinations(cidrs []string) (Destinations, error) {
	var d Destinations
	for _, c := range cidrs {
		c = strings.TrimSpace(c)
		if c == "" {
			continue
		}
		p, err := netip.ParsePrefix(c)
		if err != nil {
			a, aerr := netip.ParseAddr(c)
			if aerr != nil {
				return Destinations{}, fmt.Errorf("%q is neither a CIDR nor an address: %w", c, err)
			}
			p = netip.PrefixFrom(a, a.BitLen())
		}
		d.denied = append(d.denied, p.Masked())
	}
	return d, nil
}

// check refuses an address in a denied range, in any of the forms that
// reach it: with a zone (fe80::1%eth0: a prefix never contains a zoned
// address, so the zone is dropped first), IPv4-mapped, or through NAT64.
func (d Destinations) check(ip netip.Addr) error {
	ip = ip.WithZone("").Unmap()
	for _, candidate := range append([]netip.Addr{ip}, nat64Embedded(ip)...) {
		for _, p := range d.denied {
			if p.Contains(candidate) {
				return fmt.Errorf("hook destination %s is in %s, where the server does not call hooks (--hook-denied-cidrs)", ip, p)
			}
		}
	}
	return nil
}

var (
	// nat64WellKnown is RFC 6052's well-known NAT64 prefix, always /96.
	nat64WellKnown = netip.MustParsePrefix("64:ff9b::/96")
	// nat64LocalUse is RFC 8215's local-use NAT64 range; a network may
	// take any RFC 6052 prefix length of 48 or more inside it.
	nat64LocalUse = netip.MustParsePrefix("64:ff9b:1::/48")
)

// nat64Embedded are the IPv4 addresses a NAT64 gateway would translate ip
// to: the one RFC 6052 layout of the well-known prefix, or each layout a
// local-use prefix may have (which one a network uses can't be known
// here, so every one is checked).
func nat64Embedded(ip netip.Addr) []netip.Addr {
	b := ip.As16()
	// The IPv4 address's four bytes by prefix length, around the "u"
	// octet (byte 8), which is always skipped.
	layouts := map[int][4]int{
		48: {6, 7, 9, 10},
		56: {7, 9, 10, 11},
		64: {9, 10, 11, 12},
		96: {12, 13, 14, 15},
	}
	from := func(l [4]int) netip.Addr { return netip.AddrFrom4([4]byte{b[l[0]], b[l[1]], b[l[2]], b[l[3]]}) }
	switch {
	case !ip.Is6():
		return nil
	case nat64WellKnown.Contains(ip):
		return []netip.Addr{from(layouts[96])}
	case nat64LocalUse.Contains(ip):
		return []netip.Addr{from(layouts[48]), from(layouts[56]), from(layouts[64]), from(layouts[96])}
	}
	return nil
}

// CheckURL refuses a hook URL whose host is an address in a denied range,
// for validation when a controller is written. A name can't be judged
// then: its addresses are checked when the hook is called (control).
func (d Destinations) CheckURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil {
		return nil // validation says what is wrong with it
	}
	ip, err := netip.ParseAddr(strings.Trim(u.Hostname(), "[]"))
	if err != nil {
		return nil
	}
	return d.check(ip)
}

// control is the dialer's check of the address it is about to connect to,
// after name resolution: the last word, since hook clients use no proxy.
func (d Destinations) control(_, address string, _ syscall.RawConn) error {
	host, _, err := net.SplitHostPort(address)
	if err != nil {
		return err
	}
	ip, err := netip.ParseAddr(host)
	if err != nil {
		return err
	}
	return d.check(ip)
}
