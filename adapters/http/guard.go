package hookhttp

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
)

// specialRange is one row of the IANA IPv4 and IPv6 Special-Purpose Address
// Registries (plus multicast and deprecated ranges): the SSRF guard refuses
// every address in it, except that a range whose addresses embed an IPv4
// address a translator on the path would reach is decided on that embedded
// address instead.
type specialRange struct {
	prefix netip.Prefix
	name   string // the registry's name for the range, and its RFC
	// embedded, if set, returns the IPv4 addresses an address of the range
	// leads to; the address is allowed only if all of them are.
	embedded func(a [16]byte) []netip.Addr
}

func v4(b []byte) netip.Addr { return netip.AddrFrom4([4]byte(b)) }

// specialRanges is the guard's one table. Rows are tried in order and the
// first that contains an address decides, so a narrower row comes before
// the wider row that contains it (Teredo before 2001::/23). Globally
// reachable special-purpose anycast services (AS112, AMT, PCP, TURN) are
// refused too: none of them is a webhook recipient.
var specialRanges = []specialRange{
	// IPv4 (IANA IPv4 Special-Purpose Address Registry).
	{prefix: netip.MustParsePrefix("0.0.0.0/8"), name: `"this network" (RFC 791)`},
	{prefix: netip.MustParsePrefix("10.0.0.0/8"), name: "private-use (RFC 1918)"},
	{prefix: netip.MustParsePrefix("100.64.0.0/10"), name: "shared address space, carrier-grade NAT (RFC 6598)"},
	{prefix: netip.MustParsePrefix("127.0.0.0/8"), name: "loopback (RFC 1122)"},
	{prefix: netip.MustParsePrefix("169.254.0.0/16"), name: "link-local, cloud metadata (RFC 3927)"},
	{prefix: netip.MustParsePrefix("172.16.0.0/12"), name: "private-use (RFC 1918)"},
	{prefix: netip.MustParsePrefix("192.0.0.0/24"), name: "IETF protocol assignments, DS-Lite, NAT64 discovery (RFC 6890)"},
	{prefix: netip.MustParsePrefix("192.0.2.0/24"), name: "documentation TEST-NET-1 (RFC 5737)"},
	{prefix: netip.MustParsePrefix("192.31.196.0/24"), name: "AS112-v4 (RFC 7535)"},
	{prefix: netip.MustParsePrefix("192.52.193.0/24"), name: "AMT (RFC 7450)"},
	{prefix: netip.MustParsePrefix("192.88.99.0/24"), name: "deprecated 6to4 relay anycast (RFC 7526)"},
	{prefix: netip.MustParsePrefix("192.168.0.0/16"), name: "private-use (RFC 1918)"},
	{prefix: netip.MustParsePrefix("192.175.48.0/24"), name: "direct delegation AS112 service (RFC 7534)"},
	{prefix: netip.MustParsePrefix("198.18.0.0/15"), name: "benchmarking (RFC 2544)"},
	{prefix: netip.MustParsePrefix("198.51.100.0/24"), name: "documentation TEST-NET-2 (RFC 5737)"},
	{prefix: netip.MustParsePrefix("203.0.113.0/24"), name: "documentation TEST-NET-3 (RFC 5737)"},
	{prefix: netip.MustParsePrefix("224.0.0.0/4"), name: "multicast (RFC 5771)"},
	{prefix: netip.MustParsePrefix("240.0.0.0/4"), name: "reserved, with limited broadcast 255.255.255.255 (RFC 1112, RFC 919)"},

	// IPv6 (IANA IPv6 Special-Purpose Address Registry). IPv4-mapped
	// ::ffff:0:0/96 is unmapped before the table is consulted, so it is
	// decided as the IPv4 address it is.
	{prefix: netip.MustParsePrefix("::/96"), name: "unspecified, loopback and deprecated IPv4-compatible (RFC 4291)"},
	{prefix: netip.MustParsePrefix("::ffff:0:0:0/96"), name: "SIIT IPv4-translated (RFC 2765)",
		embedded: func(b [16]byte) []netip.Addr { return []netip.Addr{v4(b[12:16])} }},
	{prefix: netip.MustParsePrefix("64:ff9b::/96"), name: "well-known NAT64 (RFC 6052)",
		embedded: func(b [16]byte) []netip.Addr { return []netip.Addr{v4(b[12:16])} }},
	{prefix: netip.MustParsePrefix("64:ff9b:1::/48"), name: "local-use NAT64 (RFC 8215)"},
	{prefix: netip.MustParsePrefix("100::/64"), name: "discard-only (RFC 6666)"},
	{prefix: netip.MustParsePrefix("100:0:0:1::/64"), name: "dummy IPv6 prefix (RFC 9780)"},
	{prefix: netip.MustParsePrefix("2001::/32"), name: "Teredo (RFC 4380)",
		embedded: func(b [16]byte) []netip.Addr {
			// The server's IPv4 address in bits 32–63, the client's,
			// inverted, in the last 32 bits.
			client := [4]byte{^b[12], ^b[13], ^b[14], ^b[15]}
			return []netip.Addr{v4(b[4:8]), netip.AddrFrom4(client)}
		}},
	{prefix: netip.MustParsePrefix("2001::/23"), name: "IETF protocol assignments, benchmarking, ORCHID, AMT, AS112 (RFC 2928)"},
	{prefix: netip.MustParsePrefix("2001:db8::/32"), name: "documentation (RFC 3849)"},
	{prefix: netip.MustParsePrefix("2002::/16"), name: "6to4 (RFC 3056)",
		embedded: func(b [16]byte) []netip.Addr { return []netip.Addr{v4(b[2:6])} }},
	{prefix: netip.MustParsePrefix("2620:4f:8000::/48"), name: "direct delegation AS112 service (RFC 7534)"},
	{prefix: netip.MustParsePrefix("3fff::/20"), name: "documentation (RFC 9637)"},
	{prefix: netip.MustParsePrefix("5f00::/16"), name: "segment routing SIDs (RFC 9602)"},
	{prefix: netip.MustParsePrefix("fc00::/7"), name: "unique local (RFC 4193)"},
	{prefix: netip.MustParsePrefix("fe80::/10"), name: "link-local unicast (RFC 4291)"},
	{prefix: netip.MustParsePrefix("fec0::/10"), name: "deprecated site-local (RFC 3879)"},
	{prefix: netip.MustParsePrefix("ff00::/8"), name: "multicast (RFC 4291)"},
}

// addrAllowed is the SSRF guard's decision: whether a resolved address may
// be dialled. An address inside allow is always allowed; otherwise every
// address in specialRanges is refused (loopback, private, link-local with
// the cloud metadata address, carrier-grade NAT, multicast, unspecified,
// reserved, documentation…), and an IPv6 address that embeds an IPv4
// address (IPv4-mapped, SIIT, NAT64, 6to4, Teredo) is decided on the
// embedded address.
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
	for _, r := range specialRanges {
		if !r.prefix.Contains(a) {
			continue
		}
		if r.embedded == nil {
			return false
		}
		for _, e := range r.embedded(a.As16()) {
			if !addrAllowed(e, allow) {
				return false
			}
		}
		return true
	}
	return true
}

// numericHost tells whether a URL host is an IPv4 address in one of the
// spellings inet_aton(3) and the WHATWG URL standard accept but Go's
// resolver does not: fewer than four parts ("127.1"), a single number
// ("2130706433"), octal ("017700000001", "0177.0.0.1") or hex ("0x7f.1")
// parts. As in the URL standard, a host whose last label is a number is
// numeric; ok says whether it spells a valid address, and a is that
// address. A canonical dotted quad is not reported: the dialer checks it.
func numericHost(host string) (a netip.Addr, numeric, ok bool) {
	if _, err := netip.ParseAddr(host); err == nil {
		return netip.Addr{}, false, false
	}
	labels := strings.Split(host, ".")
	if len(labels) > 1 && labels[len(labels)-1] == "" {
		labels = labels[:len(labels)-1] // one trailing dot
	}
	last := labels[len(labels)-1]
	if _, isNum := parseAtonPart(last); !isNum && !allDigits(last) {
		return netip.Addr{}, false, false
	}
	if len(labels) > 4 {
		return netip.Addr{}, true, false
	}
	parts := make([]uint64, len(labels))
	for i, l := range labels {
		v, valid := parseAtonPart(l)
		if !valid {
			return netip.Addr{}, true, false
		}
		parts[i] = v
	}
	// Every part but the last is one byte; the last fills the rest.
	var n uint64
	for _, p := range parts[:len(parts)-1] {
		if p > 255 {
			return netip.Addr{}, true, false
		}
		n = n<<8 | p
	}
	rest := uint(8 * (5 - len(parts)))
	lastPart := parts[len(parts)-1]
	if lastPart >= 1<<rest {
		return netip.Addr{}, true, false
	}
	n = n<<rest | lastPart
	if n > math.MaxUint32 {
		return netip.Addr{}, true, false
	}
	return netip.AddrFrom4([4]byte{byte(n >> 24), byte(n >> 16), byte(n >> 8), byte(n)}), true, true
}

func allDigits(s string) bool {
	return s != "" && strings.Trim(s, "0123456789") == ""
}

func isHexSpelling(s string) bool {
	return len(s) >= 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X')
}

// parseAtonPart parses one part of an inet_aton spelling: "0x" hex (empty
// digits mean 0, as in the URL standard), "0" octal, or decimal.
func parseAtonPart(s string) (uint64, bool) {
	base, digits := 10, s
	switch {
	case isHexSpelling(s):
		base, digits = 16, s[2:]
		if digits == "" {
			return 0, true
		}
	case len(s) > 1 && s[0] == '0':
		base, digits = 8, s[1:]
	}
	if digits == "" || strings.ContainsAny(digits, "+-_") {
		return 0, false
	}
	v, err := strconv.ParseUint(digits, base, 64)
	return v, err == nil
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
func guardControl(allow []netip.Prefix) func(network, address string, c syscall.RawConn) error {
	return func(network, address string, c syscall.RawConn) error {
		ap, err := netip.ParseAddrPort(address)
		if err != nil || !addrAllowed(ap.Addr(), allow) {
			return &blockedError{addr: address}
		}
		return nil
	}
}

// guardPassedKey keys, in a dial's context, the flag guardControl's caller
// sets when an address of the dial passed the guard.
type guardPassedKey struct{}

// errAllowedAddressFailed is a dial's error when the guard refused some of
// a name's addresses and the ones it allowed failed.
var errAllowedAddressFailed = errors.New("no allowed address of the host could be reached (the SSRF guard refused the others)")

// guardedDial wraps a dialer's DialContext so that a name whose addresses
// the guard refused only in part fails as unreachable, not as blocked: the
// dialer returns its first address's error, which was the guard's refusal
// when a refused address came first, though an allowed one was dialled
// after it and failed (a retryable failure, read as a permanent one).
func guardedDial(dial func(ctx context.Context, network, address string) (net.Conn, error)) func(ctx context.Context, network, address string) (net.Conn, error) {
	return func(ctx context.Context, network, address string) (net.Conn, error) {
		var passed atomic.Bool
		c, err := dial(context.WithValue(ctx, guardPassedKey{}, &passed), network, address)
		var blocked *blockedError
		if err != nil && passed.Load() && errors.As(err, &blocked) {
			return nil, &net.OpError{Op: "dial", Net: network, Err: errAllowedAddressFailed}
		}
		return c, err
	}
}

// isMappedPrefix tells whether p lies within IPv4-mapped ::ffff:0:0/96.
func isMappedPrefix(p netip.Prefix) bool { return p.Addr().Is4In6() && p.Bits() >= 96 }
