package signature

import (
	"encoding/base64"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// parse is Parse with a limit no test header reaches.
func parse(header string) []Signature {
	sigs, _ := Parse(header, len(header)+1)
	return sigs
}

func TestParse(t *testing.T) {
	const header = " v1,abc=  v2,x,y junk ,nov v1, v1,def\t" // 6 entries, 3 usable
	want := []Signature{{"v1", "abc="}, {"v2", "x,y"}, {"v1", "def"}}
	sigs, ok := Parse(header, 6)
	assert.True(t, ok)
	assert.Equal(t, want, sigs)
	sigs, ok = Parse(header, 5)
	assert.False(t, ok, "unusable entries count towards the limit")
	assert.Nil(t, sigs)
	assert.Empty(t, parse(""))
	assert.Empty(t, parse("v1"))
}

func TestMatchIsTheSignatureOfTheMessage(t *testing.T) {
	key, err := DecodeSecret("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
	require.NoError(t, err)
	body := []byte(`{"test": 2432232314}`)
	const id, ts = "msg_p5jXN8AQM9LWM0D4loKWxJek", 1614265330
	sig := Sign(key, id, ts, body)
	assert.Equal(t, "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=", sig)
	assert.True(t, Match([][]byte{[]byte("other"), key}, id, ts, body, parse("v1,bm9wZQ== "+sig)))
	assert.False(t, Match([][]byte{key}, id, ts+1, body, parse(sig)))
	assert.False(t, Match([][]byte{key}, id, ts, body, parse("v2,"+strings.TrimPrefix(sig, "v1,"))))
	// The same MAC bytes spelled with the unused trailing bits set ("E" is
	// 000100, "F" is 000101): lenient base64 decodes it to the genuine MAC,
	// but it is not the signature the sender computed.
	malleated := strings.TrimSuffix(sig, "E=") + "F="
	lenient, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(malleated, "v1,"))
	require.NoError(t, err)
	require.Equal(t, mac(key, id, ts, body), lenient, "the test input must decode to the genuine MAC leniently")
	assert.False(t, Match([][]byte{key}, id, ts, body, parse(malleated)))
}

func TestDecodeSecret(t *testing.T) {
	k, err := DecodeSecret("whsec_" + base64.StdEncoding.EncodeToString([]byte("key")))
	require.NoError(t, err)
	assert.Equal(t, []byte("key"), k)
	for _, bad := range []string{"", "whsec_", "whsec_***", "whsec_a"} {
		_, err := DecodeSecret(bad)
		assert.ErrorIs(t, err, ErrInvalidSecret, "%q", bad)
	}
}

func FuzzParseSignatureHeader(f *testing.F) {
	for _, s := range []string{
		"v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=",
		"v1,a v1,b",
		"v1,abc= v2,x,y junk ,nov v1,",
		"",
		"   ",
		",,,",
		"v1,\x00\xff",
	} {
		f.Add(s)
	}
	key := []byte("fuzz-key")
	f.Fuzz(func(t *testing.T, header string) {
		sigs := parse(header)
		for _, s := range sigs {
			if s.Version == "" || s.Value == "" || strings.ContainsAny(s.Version, " \t\n\r") {
				t.Fatalf("bad entry %+v from %q", s, header)
			}
		}
		// Whatever the header, Match must not panic, and the genuine
		// signature appended to it always matches.
		Match([][]byte{key}, "id", 1, []byte(header), sigs)
		genuine := Sign(key, "id", 1, []byte(header))
		if !Match([][]byte{key}, "id", 1, []byte(header), parse(header+" "+genuine)) {
			t.Fatalf("genuine signature not matched after %q", header)
		}
	})
}

// TestHeaderOfIsHeader signs with pooled Keys, each several times over
// (a reused HMAC state must start from the key again), and compares with
// Header.
func TestHeaderOfIsHeader(t *testing.T) {
	raw := [][]byte{[]byte("first key"), []byte("second"), []byte("k3-" + strings.Repeat("x", 100))} // the last longer than a hash block
	keys := make([]*Key, len(raw))
	for i, r := range raw {
		keys[i] = NewKey(r)
	}
	for round := range 3 {
		for n := 0; n <= len(raw); n++ {
			for _, ts := range []int64{0, 1614265330, -5} {
				id := "msg_" + strings.Repeat("a", round*7+n)
				body := []byte(`{"n":` + strings.Repeat("1", n+round) + `}`)
				assert.Equal(t, Header(raw[:n], id, ts, body), HeaderOf(keys[:n], id, ts, body), "round %d, %d keys, ts %d", round, n, ts)
			}
		}
	}
	key, err := DecodeSecret("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
	require.NoError(t, err)
	assert.Equal(t, "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=",
		HeaderOf([]*Key{NewKey(key)}, "msg_p5jXN8AQM9LWM0D4loKWxJek", 1614265330, []byte(`{"test": 2432232314}`)))
}

// BenchmarkHeader and BenchmarkHeaderOf sign a 512-byte body with one key,
// decoded and keyed afresh (Header) or from a pooled Key (HeaderOf).
func BenchmarkHeader(b *testing.B) {
	body := []byte(strings.Repeat("x", 512))
	b.ReportAllocs()
	for b.Loop() {
		key, _ := DecodeSecret("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
		Header([][]byte{key}, "whd_0f8e2a4c-1111-5222-8333-444455556666", 1772600767, body)
	}
}

func BenchmarkHeaderOf(b *testing.B) {
	body := []byte(strings.Repeat("x", 512))
	key, _ := DecodeSecret("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
	keys := []*Key{NewKey(key)}
	b.ReportAllocs()
	for b.Loop() {
		HeaderOf(keys, "whd_0f8e2a4c-1111-5222-8333-444455556666", 1772600767, body)
	}
}

// TestDecodeSecretSaysWhatIsWrong: each common misspelling of a secret is
// refused with an error that says what is wrong and never quotes the
// secret; the spellings the reference library accepts decode to the key.
func TestDecodeSecretSaysWhatIsWrong(t *testing.T) {
	key := []byte(strings.Repeat("~", 32)) // base64 "fn5+…"
	std := base64.StdEncoding.EncodeToString(key)
	require.True(t, strings.ContainsAny(std, "+/"), "the test key must use the characters URL-safe base64 replaces")
	for _, ok := range []string{"whsec_" + std, std, "whsec_" + std + "\n", "whsec_" + std + "\r\n"} {
		got, err := DecodeSecret(ok)
		if assert.NoError(t, err, "%q", ok) {
			assert.Equal(t, key, got, "%q", ok)
		}
	}
	short := base64.StdEncoding.EncodeToString([]byte("0123456789abcdefghijklmnop")) // padded
	require.True(t, strings.HasSuffix(short, "="))
	for _, tt := range []struct{ secret, reason string }{
		{"", "empty"},
		{"whsec_", "empty"},
		{"whsec_\n", "empty"},
		{" whsec_" + std, "whitespace"},
		{"whsec_" + std + " ", "whitespace"},
		{"whsec_" + std + "\t", "whitespace"},
		{"WHSEC_" + std, "lower-case"},
		{"Whsec_" + std, "lower-case"},
		{"whsec_" + base64.URLEncoding.EncodeToString(key), "URL-safe"},
		{"whsec_" + strings.TrimRight(short, "="), "padding"},
		{"whsec_***", "not standard base64"},
	} {
		_, err := DecodeSecret(tt.secret)
		require.ErrorIs(t, err, ErrInvalidSecret, "%q", tt.secret)
		assert.Contains(t, err.Error(), tt.reason, "%q", tt.secret)
		if body := strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(tt.secret), "whsec_")); len(body) > 3 {
			assert.NotContains(t, err.Error(), body[:4], "%q", tt.secret)
		}
	}
}
