package errtext

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
)

func TestQuote(t *testing.T) {
	assert.Equal(t, `"dest_1"`, Quote("dest_1"))
	assert.Equal(t, `"line\nbreak\x00\xff"`, Quote("line\nbreak\x00\xff"), "one line, escaped as %q does")
	long := Quote(strings.Repeat("x", 1<<20))
	assert.Equal(t, `"`+strings.Repeat("x", QuoteMax)+`"…`, long, "a megabyte is cut to QuoteMax bytes")
	// Cut on a rune boundary: 63 bytes of x, then a 3-byte rune that
	// would straddle the limit.
	cut := Quote(strings.Repeat("x", QuoteMax-1) + "€€")
	assert.Equal(t, `"`+strings.Repeat("x", QuoteMax-1)+`"…`, cut)
	assert.True(t, utf8.ValidString(cut))
}

func TestPlain(t *testing.T) {
	for _, s := range []string{"whd_4f2a9c", "dest_1", "café"} {
		assert.True(t, Plain(s), "%q", s)
	}
	for _, s := range []string{"", "a b", "line\nbreak", "nul\x00", "\xff", strings.Repeat("x", QuoteMax+1)} {
		assert.False(t, Plain(s), "%q", s)
	}
}
