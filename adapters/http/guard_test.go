package hookhttp

import (
	"context"
	"encoding/binary"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/net/dns/dnsmessage"

	"github.com/hookrelay/hookrelay"
)

func TestGuardDecision(t *testing.T) {
	blocked := []string{
		"127.0.0.1", "127.255.255.254", "::1",
		"10.0.0.1", "172.16.0.1", "172.31.255.255", "192.168.1.1",
		"169.254.169.254", "169.254.0.1", "fe80::1", "fe80::1%eth0",
		"100.64.0.1", "100.127.255.255",
		"fc00::1", "fd12:3456:789a::1",
		"224.0.0.1", "239.255.255.250", "ff02::1", "ff05::2",
		"0.0.0.0", "0.1.2.3", "::", "255.255.255.255", "240.0.0.1",
		// IPv4-mapped, IPv4-compatible, NAT64 and 6to4 spellings.
		"::ffff:127.0.0.1", "::ffff:10.0.0.1", "::ffff:169.254.169.254", "::ffff:100.64.0.1",
		"::127.0.0.1", "::10.0.0.1",
		"64:ff9b::7f00:1", "64:ff9b::a9fe:a9fe", "2002:7f00:1::1", "2002:a00:1::",
		"fec0::1", "2001:db8::1", "198.18.0.1", "192.0.0.8",
	}
	allowed := []string{
		"93.184.216.34", "1.1.1.1", "8.8.8.8", "100.63.255.255", "100.128.0.0",
		"172.15.255.255", "172.32.0.0", "169.253.255.255",
		"2606:4700:4700::1111", "2a00:1450:4001:80b::200e", "::ffff:93.184.216.34",
		"64:ff9b::5db8:d822", "2002:5db8:d822::1",
	}
	for _, s := range blocked {
		assert.False(t, addrAllowed(netip.MustParseAddr(s), nil), "%s must be blocked", s)
	}
	for _, s := range allowed {
		assert.True(t, addrAllowed(netip.MustParseAddr(s), nil), "%s must be allowed", s)
	}
	assert.False(t, addrAllowed(netip.Addr{}, nil), "an invalid address is blocked")

	allow := []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("::1/128"), netip.MustParsePrefix("10.20.0.0/16")}
	for _, s := range []string{"127.0.0.1", "127.9.9.9", "::1", "::ffff:127.0.0.1", "10.20.30.40"} {
		assert.True(t, addrAllowed(netip.MustParseAddr(s), allow), "%s is on the allow-list", s)
	}
	for _, s := range []string{"10.21.0.1", "192.168.0.1", "169.254.169.254", "::2"} {
		assert.False(t, addrAllowed(netip.MustParseAddr(s), allow), "%s is not on the allow-list", s)
	}
}

// fakeDNS is a resolver that never leaves the process: every query is
// answered from answers over an in-memory pipe; unknown names are NXDOMAIN.
func fakeDNS(t *testing.T, answers map[string][]netip.Addr) *net.Resolver {
	var wg sync.WaitGroup
	t.Cleanup(wg.Wait)
	return &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, _, _ string) (net.Conn, error) {
		client, server := net.Pipe()
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer server.Close()
			serveDNS(server, answers)
		}()
		return client, nil
	}}
}

func serveDNS(conn net.Conn, answers map[string][]netip.Addr) {
	for {
		var n [2]byte
		if _, err := io.ReadFull(conn, n[:]); err != nil {
			return
		}
		msg := make([]byte, binary.BigEndian.Uint16(n[:]))
		if _, err := io.ReadFull(conn, msg); err != nil {
			return
		}
		var p dnsmessage.Parser
		h, err := p.Start(msg)
		if err != nil {
			return
		}
		q, err := p.Question()
		if err != nil {
			return
		}
		addrs, known := answers[strings.TrimSuffix(q.Name.String(), ".")]
		rh := dnsmessage.Header{ID: h.ID, Response: true, Authoritative: true, RecursionAvailable: true}
		if !known {
			rh.RCode = dnsmessage.RCodeNameError
		}
		b := dnsmessage.NewBuilder(nil, rh)
		_ = b.StartQuestions()
		_ = b.Question(q)
		_ = b.StartAnswers()
		rr := dnsmessage.ResourceHeader{Name: q.Name, Class: dnsmessage.ClassINET, TTL: 60}
		for _, a := range addrs {
			switch {
			case q.Type == dnsmessage.TypeA && a.Is4():
				rr.Type = dnsmessage.TypeA
				_ = b.AResource(rr, dnsmessage.AResource{A: a.As4()})
			case q.Type == dnsmessage.TypeAAAA && a.Is6():
				rr.Type = dnsmessage.TypeAAAA
				_ = b.AAAAResource(rr, dnsmessage.AAAAResource{AAAA: a.As16()})
			}
		}
		resp, err := b.Finish()
		if err != nil {
			return
		}
		out := binary.BigEndian.AppendUint16(nil, uint16(len(resp)))
		if _, err := conn.Write(append(out, resp...)); err != nil {
			return
		}
	}
}

// abortingDialer resolves through fakeDNS and records every address that
// got past the guard, then aborts before connect(2): even a broken guard
// cannot send a packet off this machine.
func abortingDialer(t *testing.T, answers map[string][]netip.Addr) (*net.Dialer, func() []string) {
	var mu sync.Mutex
	var reached []string
	d := &net.Dialer{
		Resolver: fakeDNS(t, answers),
		Control: func(_, address string, _ syscall.RawConn) error {
			mu.Lock()
			reached = append(reached, address)
			mu.Unlock()
			return syscall.EPERM
		},
	}
	return d, func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), reached...)
	}
}

var dnsAnswers = map[string][]netip.Addr{
	// What an inet_aton-style resolver makes of odd literal forms.
	"2130706433":   {netip.MustParseAddr("127.0.0.1")},
	"017700000001": {netip.MustParseAddr("127.0.0.1")},
	"0x7f000001":   {netip.MustParseAddr("127.0.0.1")},
	"0177.0.0.1":   {netip.MustParseAddr("127.0.0.1")},
	"127.1":        {netip.MustParseAddr("127.0.0.1")},
	"0xa9fea9fe":   {netip.MustParseAddr("169.254.169.254")},
	// Names that resolve to blocked addresses, in both families.
	"metadata.example":  {netip.MustParseAddr("169.254.169.254")},
	"rebind.example":    {netip.MustParseAddr("10.1.2.3")},
	"cgnat.example":     {netip.MustParseAddr("100.64.1.1")},
	"mapped.example":    {netip.MustParseAddr("::ffff:192.168.1.1")},
	"ula.example":       {netip.MustParseAddr("fd00::1")},
	"nat64.example":     {netip.MustParseAddr("64:ff9b::a00:1")},
	"split.example":     {netip.MustParseAddr("10.9.9.9"), netip.MustParseAddr("fd00::9")},
	"public.example":    {netip.MustParseAddr("93.184.216.34")},
	"public-v6.example": {netip.MustParseAddr("2606:4700:4700::1111")},
}

func TestGuardRefusesBlockedAddressesAtDialTime(t *testing.T) {
	dialer, reached := abortingDialer(t, dnsAnswers)
	s := newTestSender(t, Config{AllowNetworks: []netip.Prefix{}, Dialer: dialer})

	urls := []string{
		"http://127.0.0.1:9/", "http://[::1]:9/", "http://localhost:9/",
		"http://[::ffff:127.0.0.1]:9/", "http://[::ffff:7f00:1]:9/", "http://[0:0:0:0:0:ffff:7f00:0001]:9/",
		"http://169.254.169.254/latest/meta-data/", "http://[::ffff:169.254.169.254]/",
		"http://10.0.0.1/", "http://192.168.0.10:8080/", "http://172.20.0.1/",
		"http://100.64.0.1/", "http://[fd00::1]/", "http://[fe80::1%25eth0]/",
		"http://0.0.0.0:9/", "http://224.0.0.1/", "http://[ff02::1]/",
		"http://0x7f000001:9/", "https://0xa9fea9fe/", "https://metadata.example/", "https://rebind.example/",
		"https://cgnat.example/", "https://mapped.example/", "https://ula.example/",
		"https://nat64.example/", "https://split.example/",
		"http://user:pass@10.0.0.1/",
	}
	for _, u := range urls {
		res := s.Send(context.Background(), sendParams(u, "{}"))
		assert.Equal(t, hookrelay.KindPermanent, res.Kind, u)
		assert.Equal(t, ReasonDestinationBlocked, res.Reason, u)
		assert.Equal(t, hookrelay.OutcomeRejected, res.Outcome, u)
	}
	assert.Empty(t, reached(), "the guard refuses before the dialer's own Control runs")

	// Numeric spellings Go's resolver does not read (it would fail them as
	// a retried dns_failure, while other software reads them as addresses)
	// are refused at once, before any lookup or dial.
	for _, u := range []string{
		"http://2130706433:9/", "http://0177.0.0.1:9/", "http://127.1:9/", "http://017700000001/",
		"http://0x7f.1/", "http://0x7f000001./", "http://0xa9.0xfe.0xa9.0xfe/", "http://10.1/", "http://0/",
		"http://user:pass@0x0a000001/",
	} {
		res := s.Send(context.Background(), sendParams(u, "{}"))
		assert.Equal(t, hookrelay.KindPermanent, res.Kind, u)
		assert.Equal(t, ReasonDestinationBlocked, res.Reason, u)
		assert.NotContains(t, res.Detail, "pass", u)
	}
	assert.Empty(t, reached())
}

func TestNumericHostSpellingsAreRefusedAtOnce(t *testing.T) {
	dialer, reached := abortingDialer(t, dnsAnswers)
	s := newTestSender(t, Config{AllowNetworks: loopback, Dialer: dialer})
	tests := []struct {
		url, reason string
	}{
		{"http://1.1/", ReasonInvalidURL},         // 1.0.0.1: public, but not a spelling to dial
		{"http://3627734018/", ReasonInvalidURL},  // 216.58.214.2
		{"http://127.1/", ReasonInvalidURL},       // allowed loopback, still not dialled
		{"http://1.2.3.4.5/", ReasonInvalidURL},   // too many parts
		{"http://1.2.3.256/", ReasonInvalidURL},   // a part over 255
		{"http://4294967296/", ReasonInvalidURL},  // over 32 bits
		{"http://example.089/", ReasonInvalidURL}, // ends in a number that is not one
		{"http://0x100000000/", ReasonInvalidURL}, // over 32 bits in hex
		{"http://192.168.0x1.1/", ReasonDestinationBlocked},
		{"http://0300.0250.1.1/", ReasonDestinationBlocked}, // 192.168.1.1 in octal
	}
	for _, tt := range tests {
		res := s.Send(context.Background(), sendParams(tt.url, "{}"))
		assert.Equal(t, hookrelay.KindPermanent, res.Kind, tt.url)
		assert.Equal(t, tt.reason, res.Reason, tt.url)
	}
	assert.Empty(t, reached(), "nothing is resolved or dialled")
}

func TestNumericHost(t *testing.T) {
	tests := []struct {
		host    string
		numeric bool
		addr    string // "" when not a valid spelling
	}{
		{"127.0.0.1", false, ""}, // a dotted quad is the dialer's to check
		{"example.com", false, ""},
		{"1.example", false, ""},
		{"0xzz", false, ""},
		{"127.1", true, "127.0.0.1"},
		{"2130706433", true, "127.0.0.1"},
		{"017700000001", true, "127.0.0.1"},
		{"0x7f.1", true, "127.0.0.1"},
		{"0x7f000001", true, "127.0.0.1"},
		{"0177.0.0.1", true, "127.0.0.1"},
		{"127.0.1", true, "127.0.0.1"},
		{"127.0.0.1.", true, "127.0.0.1"},
		{"0x", true, "0.0.0.0"},
		{"1.2.3.256", true, ""},
		{"256.1", true, ""},
		{"1.16777216", true, ""},
		{"09", true, ""},
		{"1.2.3.4.5", true, ""},
	}
	for _, tt := range tests {
		a, numeric, ok := numericHost(tt.host)
		assert.Equal(t, tt.numeric, numeric, tt.host)
		assert.Equal(t, tt.addr != "", ok, tt.host)
		if tt.addr != "" {
			assert.Equal(t, tt.addr, a.String(), tt.host)
		}
	}
}

// lastAddr returns the last address of p.
func lastAddr(p netip.Prefix) netip.Addr {
	b := p.Masked().Addr().AsSlice()
	for i := p.Bits(); i < len(b)*8; i++ {
		b[i/8] |= 0x80 >> (i % 8)
	}
	a, _ := netip.AddrFromSlice(b)
	return a
}

func inSpecialRange(a netip.Addr) bool {
	for _, r := range specialRanges {
		if r.prefix.Contains(a) {
			return true
		}
	}
	return false
}

// TestGuardRefusesEveryRangeOfTheTable tries each row of the table through
// the guard's decision: its first, middle and last addresses are refused
// (or, for a row that embeds an IPv4 address, refused with an internal one
// embedded and allowed with a public one), and its neighbours outside every
// row are allowed.
func TestGuardRefusesEveryRangeOfTheTable(t *testing.T) {
	embed := func(p netip.Prefix, v4 netip.Addr, at ...int) netip.Addr {
		b := p.Addr().As16()
		x := v4.As4()
		for _, i := range at {
			copy(b[i:i+4], x[:])
		}
		if p.Addr().String() == "2001::" { // Teredo: client inverted in the last 32 bits
			for i := 12; i < 16; i++ {
				b[i] = ^b[i]
			}
		}
		return netip.AddrFrom16(b)
	}
	internal, public := netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("93.184.216.34")
	for _, r := range specialRanges {
		t.Run(r.prefix.String(), func(t *testing.T) {
			first, last := r.prefix.Addr(), lastAddr(r.prefix)
			if r.embedded == nil {
				for _, a := range []netip.Addr{first, last, first.Next(), last.Prev()} {
					assert.False(t, addrAllowed(a, nil), "%s (%s) must be refused", a, r.name)
				}
			} else {
				var at []int
				switch r.prefix.Addr().String() {
				case "2002::":
					at = []int{2}
				case "2001::":
					at = []int{4, 12}
				default:
					at = []int{12}
				}
				bad, good := embed(r.prefix, internal, at...), embed(r.prefix, public, at...)
				require.True(t, r.prefix.Contains(bad) && r.prefix.Contains(good))
				assert.False(t, addrAllowed(bad, nil), "%s embeds %s (%s)", bad, internal, r.name)
				assert.True(t, addrAllowed(good, nil), "%s embeds %s (%s)", good, public, r.name)
				for _, loop := range []netip.Addr{netip.MustParseAddr("127.0.0.1"), netip.MustParseAddr("169.254.169.254"), netip.MustParseAddr("100.64.0.1")} {
					assert.False(t, addrAllowed(embed(r.prefix, loop, at...), nil), "%s embedded in %s", loop, r.name)
				}
			}
			for _, n := range []netip.Addr{first.Prev(), last.Next()} {
				if n.IsValid() && !inSpecialRange(n) && !n.Unmap().Is4() == first.Is6() {
					assert.True(t, addrAllowed(n, nil), "%s, next to %s, must be allowed", n, r.prefix)
				}
			}
		})
	}
	for _, s := range []string{
		"64:ff9b:1::a00:1", "64:ff9b:1:ffff::1", "::ffff:0:7f00:1", "::ffff:0:a9fe:a9fe",
		"2001:0:a00:1::", "2001:2::1", "2001:db8::1", "3fff::1", "5f00::1", "2620:4f:8000::1",
		"192.0.2.1", "198.51.100.1", "203.0.113.1", "192.88.99.1", "255.255.255.255",
	} {
		assert.False(t, addrAllowed(netip.MustParseAddr(s), nil), s)
	}
}

func TestGuardLetsAllowedAddressesThroughToTheDialer(t *testing.T) {
	dialer, reached := abortingDialer(t, dnsAnswers)
	s := newTestSender(t, Config{
		AllowNetworks: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")},
		Dialer:        dialer,
	})

	for _, u := range []string{"https://public.example/", "https://public-v6.example/", "http://rebind.example/"} {
		res := s.Send(context.Background(), sendParams(u, "{}"))
		assert.Equal(t, hookrelay.KindRetryable, res.Kind, u)
		assert.Equal(t, hookrelay.OutcomeRejected, res.Outcome, "aborted before anything was sent: %s", u)
	}
	assert.ElementsMatch(t, []string{"93.184.216.34:443", "[2606:4700:4700::1111]:443", "10.1.2.3:80"}, reached())
}

func TestGuardIsOnByDefaultForLoopbackServers(t *testing.T) {
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { hits.Add(1) }))
	t.Cleanup(srv.Close)
	s, err := New(Config{})
	require.NoError(t, err)
	t.Cleanup(s.CloseIdleConnections)

	res := s.Send(context.Background(), sendParams(srv.URL, "{}"))

	assert.Equal(t, ReasonDestinationBlocked, res.Reason)
	assert.Contains(t, res.Detail, "SSRF guard")
	assert.Zero(t, hits.Load())
}

func TestGuardAlsoWrapsControlContext(t *testing.T) {
	var reached atomic.Int32
	s := newTestSender(t, Config{AllowNetworks: []netip.Prefix{}, Dialer: &net.Dialer{
		ControlContext: func(context.Context, string, string, syscall.RawConn) error {
			reached.Add(1)
			return syscall.EPERM
		},
	}})
	res := s.Send(context.Background(), sendParams("http://127.0.0.1:9/", "{}"))
	assert.Equal(t, ReasonDestinationBlocked, res.Reason)
	assert.Zero(t, reached.Load())
}

// TestGuardBlocksOnlyWhenNoAddressWasAllowed: a name whose answer mixes
// refused and allowed addresses is dialled on the allowed ones only; when
// they fail, the attempt failed as any unreachable recipient does
// (retryable), whatever the order of the answer, not as a permanent
// destination_blocked because a refused address came first.
func TestGuardBlocksOnlyWhenNoAddressWasAllowed(t *testing.T) {
	answers := map[string][]netip.Addr{
		"private-first.example": {netip.MustParseAddr("10.9.9.9"), netip.MustParseAddr("93.184.216.34")},
		"public-first.example":  {netip.MustParseAddr("93.184.216.34"), netip.MustParseAddr("10.9.9.9")},
		"families.example":      {netip.MustParseAddr("10.9.9.9"), netip.MustParseAddr("2606:4700:4700::1111")},
		"all-refused.example":   {netip.MustParseAddr("10.9.9.9"), netip.MustParseAddr("fd00::9")},
	}
	for name, public := range map[string][]string{
		"private-first.example": {"93.184.216.34:80"},
		"public-first.example":  {"93.184.216.34:80"},
		"families.example":      {"[2606:4700:4700::1111]:80"},
		"all-refused.example":   nil,
	} {
		dialer, reached := abortingDialer(t, answers)
		s := newTestSender(t, Config{AllowNetworks: []netip.Prefix{}, Dialer: dialer})
		res := s.Send(context.Background(), sendParams("http://"+name+"/", "{}"))
		assert.Equal(t, public, reached(), "%s: only the allowed addresses reach the dialer", name)
		if public == nil {
			assert.Equal(t, ReasonDestinationBlocked, res.Reason, name)
			continue
		}
		assert.Equal(t, hookrelay.KindRetryable, res.Kind, "%s: %s %s", name, res.Reason, res.Detail)
		assert.NotEqual(t, ReasonDestinationBlocked, res.Reason, name)
		assert.Equal(t, hookrelay.OutcomeRejected, res.Outcome, name)
	}
}

// TestAllowNetworksInIPv4MappedForm: an allowed IPv4 network written in its
// IPv4-mapped IPv6 form (::ffff:127.0.0.0/104) allows that network, as the
// guard decides a mapped address as the IPv4 address it is; it allowed
// nothing.
func TestAllowNetworksInIPv4MappedForm(t *testing.T) {
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { hits.Add(1) }))
	t.Cleanup(srv.Close)
	onlyLoopback := func(_, address string, _ syscall.RawConn) error {
		if ap, err := netip.ParseAddrPort(address); err != nil || !ap.Addr().Unmap().IsLoopback() {
			return syscall.EPERM
		}
		return nil
	}
	s := newTestSender(t, Config{
		AllowNetworks: []netip.Prefix{netip.MustParsePrefix("::ffff:127.0.0.0/104")},
		Dialer:        &net.Dialer{Control: onlyLoopback},
	})
	res := s.Send(context.Background(), sendParams(srv.URL, "{}"))
	assert.Equal(t, hookrelay.KindDelivered, res.Kind, "%s %s", res.Reason, res.Detail)
	assert.EqualValues(t, 1, hits.Load())

	s = newTestSender(t, Config{
		AllowNetworks: []netip.Prefix{netip.MustParsePrefix("::ffff:10.0.0.0/104")},
		Dialer:        &net.Dialer{Control: onlyLoopback},
	})
	res = s.Send(context.Background(), sendParams(srv.URL, "{}"))
	assert.Equal(t, ReasonDestinationBlocked, res.Reason, "another network stays refused")
}
