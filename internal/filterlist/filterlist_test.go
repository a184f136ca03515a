package filterlist_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hookrelay/hookrelay/internal/filterlist"
)

func TestSplitReadsCommasOutsideQuotesAsSeparators(t *testing.T) {
	for in, want := range map[string][]string{
		"acct,eu":             {"acct", "eu"},
		" acct , eu ,, ":      {"acct", "eu"},
		`"acct,eu"`:           {"acct,eu"},
		` "acct,eu" `:         {"acct,eu"},
		`eu, "acct,eu"`:       {"eu", "acct,eu"},
		`say "hi",eu`:         {`say "hi"`, "eu"},
		`"say ""hi"", twice"`: {`say "hi", twice`},
		"\"line\nbreak\"":     {"line\nbreak"},
		"":                    nil,
		" , ":                 nil,
	} {
		got, err := filterlist.Split(in)
		require.NoError(t, err, "%q", in)
		assert.Equal(t, want, got, "%q", in)
	}
	for _, in := range []string{
		`"acct,eu`, `"acct"eu`, "acct\neu",
		`say "hi", "acct,eu`,   // a quote left open after a value with quotes in it
		`x"y, "a"b`, `a "b,c"`, // a quote left open in a value without quotes
	} {
		_, err := filterlist.Split(in)
		assert.Error(t, err, "%q is refused, not read as some other value", in)
	}
}

func TestJoinIsReadBackBySplit(t *testing.T) {
	for _, vs := range [][]string{{"acct", "eu"}, {"acct,eu"}, {`say "hi"`, `"quoted"`}, {"line\nbreak", "x"}} {
		got, err := filterlist.Split(filterlist.Join(vs))
		require.NoError(t, err, "%q", vs)
		assert.Equal(t, vs, got)
	}
}
