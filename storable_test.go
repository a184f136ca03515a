package hookrelay_test

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"

	"github.com/hookrelay/hookrelay"
)

func TestStorableTextIsValidUTF8CutAtARuneBoundary(t *testing.T) {
	const limit = hookrelay.MaxStoredTextBytes
	for _, c := range []struct {
		name, in, want string
	}{
		{"Empty", "", ""},
		{"ShortTextIsKept", "http_503: upstream busy", "http_503: upstream busy"},
		{"ExactlyTheLimitIsKept", strings.Repeat("a", limit), strings.Repeat("a", limit)},
		{"OneByteOverIsCut", strings.Repeat("a", limit+1), strings.Repeat("a", limit)},
		{"ATwoByteRuneAcrossTheLimitIsLeftOut", strings.Repeat("é", limit), strings.Repeat("é", limit/2)},
		{"AFourByteRuneAcrossTheLimitIsLeftOut", "ab" + strings.Repeat("😀", limit/4+1), "ab" + strings.Repeat("😀", (limit-2)/4)},
		{"InvalidBytesAndNULBecomeReplacementCharacters", "a\xff\xfeb\x00c", "a\uFFFDb\uFFFDc"},
		{"ReplacementsCountTowardsTheLimit", "\x00" + strings.Repeat("a", limit-1), "\uFFFD" + strings.Repeat("a", limit-3)},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := hookrelay.StorableText(c.in)
			assert.True(t, got == c.want, "got %d bytes, want %d", len(got), len(c.want))
			assert.True(t, utf8.ValidString(got))
			assert.LessOrEqual(t, len(got), limit)
		})
	}
}
