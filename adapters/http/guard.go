package hookhttp

import (
	"fmt"
	"net/netip"
	"syscall"
)

// blockedPrefixes are ranges refused beyond what netip's predicates cover
// (loopback, private, link-local, multicast, unspecified).
var blockedPrefixes = []netip.Prefix{
	netip.MustParsePrefix("0.0.0.0/8"),     // "this network"
	netip.MustParsePrefix("100.64.0.0/10"), // carrier-grade NAT (RFC 6598)
	netip.MustParsePrefix("192.0.0.0/24"),  // IETF protocol assignments
	netip.MustParsePrefix("198.18.0.0/15"), // benchmarking
	netip.MustParsePrefix("240.0.0.0/4"),   // reserved, including broadcast
	netip.MustParsePrefix("::/96"),         // IPv4-compatible (deprecated)
	netip.MustParsePrefix("fec0::/10"),     // site-local (deprecated)
	netip.MustParsePrefix("2001:db8::/32"), // documentation
	netip.MustParsePrefix("100::/64"),      // discard-only
}

// Prefixes whose addresses embed an IPv4 address that a translator on the
// path would reach; the embedded address is checked too.
var (
	nat64Prefix = netip.MustParsePrefix("64:ff9b::/96")
	sixToFour   = netip.MustParsePrefix("2002::/16")
)

// addrAllowed is the SSRF guard's decision: whether a resolved address may
// be dialled. An address inside allow is always allowed; otherwise loopback,
// private (RFC 1918, fc00::/7), link-local (169.254.0.0/16 with the cloud
// metadata address, fe80::/10), carrier-grade NAT, multicast, unspecified
// and reserved addresses are refused, in any IPv4-mapped or embedded form.
func addrAllowed(a netip.Addr, allow []netip.Prefix) bool {
	a = a.WithZone("").Unmap()
	if !a.IsValid() {
		return false
	}
	for _, p := range allow {
		if p.Contains(a) {
			return true
		}
	}
	if a.IsUnspecified() || a.IsLoopback() || a.IsPrivate() || a.IsMulticast() ||
		a.IsLinkLocalUnicast() || a.IsLinkLocalMulticast() || a.IsInterfaceLocalMulticast() {
		return false
	}
	for _, p := range blockedPrefixes {
		if p.Contains(a) {
			return false
		}
	}
	if a.Is6() {
		b := a.As16()
		switch {
		case nat64Prefix.Contains(a):
			return addrAllowed(netip.AddrFrom4([4]byte(b[12:16])), allow)
		case sixToFour.Contains(a):
			return addrAllowed(netip.AddrFrom4([4]byte(b[2:6])), allow)
		}
	}
	return true
}

// blockedError reports a dial refused by the SSRF guard. The address is
// the resolved IP and port, never the URL.
type blockedError struct{ addr string }

func (e *blockedError) Error() string {
	return fmt.Sprintf("address %s is not allowed (SSRF guard; see Config.AllowNetworks)", e.addr)
}

// guardControl returns a net.Dialer Control function that refuses
// addresses addrAllowed rejects. It runs after DNS resolution, on the exact
// address about to be connected, so a name that resolves (or re-resolves)
// to a blocked address and odd literal forms of an address are caught.
func guardControl(allow []netip.Prefix, next func(network, address string, c syscall.RawConn) error) func(network, address string, c syscall.RawConn) error {
	return func(network, address string, c syscall.RawConn) error {
		ap, err := netip.ParseAddrPort(address)
		if err != nil || !addrAllowed(ap.Addr(), allow) {
			return &blockedError{addr: address}
		}
		if next != nil {
			return next(network, address, c)
		}
		return nil
	}
}
