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

// check refuses an address in a denied range.
func (d Destinations) check(ip netip.Addr) error {
	ip = ip.Unmap()
	for _, p := range d.denied {
		if p.Contains(ip) {
			return fmt.Errorf("hook destination %s is in %s, where the server does not call hooks (--hook-denied-cidrs)", ip, p)
		}
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
