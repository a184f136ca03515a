// Package filterlist reads the comma-separated lists that the CLI's
// selection flags and the console's filter fields take, quoted as in
// CSV: a value holding a comma is written in double quotes,
// "acct,eu", with a double quote inside it doubled. A value with no comma
// is written as it is, balanced double quotes inside it included
// (say "hi").
package filterlist

import (
	"errors"
	"strings"
)

var (
	errOpen = errors.New(`has a quoted value left open or followed by more than a comma: write a value holding a comma in double quotes, "like,this"`)
	errLone = errors.New(`has a value with a double quote left open: write a value holding a double quote in double quotes, with the quote doubled ("say ""hi""")`)
	errLine = errors.New(`holds a line break outside double quotes: write such a value in double quotes`)
)

// Split returns the values of s, each trimmed of white space; blank
// values are dropped. It refuses a quoted value left open (or followed
// by more than a comma), a value written without quotes that holds an odd
// number of double quotes (a quote left open: `a "b,c"` is not read as
// two values), and a line break outside quotes, which would otherwise
// select values the operator did not write.
//
// Written by hand: encoding/csv either refuses a double quote inside a
// value written without quotes (say "hi") or, with LazyQuotes, accepts a
// quoted value left open; this list needs the first to pass and the
// second to fail.
func Split(s string) ([]string, error) {
	var out []string
	rest := strings.TrimSpace(s)
	if rest == "" {
		return nil, nil
	}
	for {
		rest = strings.TrimLeft(rest, " \t")
		var v string
		if strings.HasPrefix(rest, `"`) {
			var b strings.Builder
			i := 1
			for {
				j := strings.IndexByte(rest[i:], '"')
				if j < 0 {
					return nil, errOpen
				}
				b.WriteString(rest[i : i+j])
				i += j + 1
				if !strings.HasPrefix(rest[i:], `"`) {
					break
				}
				b.WriteByte('"') // "" is a quote inside the value
				i++
			}
			v, rest = b.String(), strings.TrimLeft(rest[i:], " \t")
			if rest != "" && rest[0] != ',' {
				return nil, errOpen
			}
		} else {
			end := strings.IndexByte(rest, ',')
			if end < 0 {
				end = len(rest)
			}
			v, rest = rest[:end], rest[end:]
			switch {
			case strings.ContainsAny(v, "\r\n"):
				return nil, errLine
			case strings.Count(v, `"`)%2 == 1:
				return nil, errLone
			}
		}
		if v = strings.TrimSpace(v); v != "" {
			out = append(out, v)
		}
		if rest == "" {
			return out, nil
		}
		rest = rest[1:] // the comma
	}
}

// Join writes values as Split reads them back: a value holding a comma,
// a line break or a double quote, in double quotes.
func Join(values []string) string {
	parts := make([]string, len(values))
	for i, v := range values {
		if strings.ContainsAny(v, ",\"\r\n") {
			v = `"` + strings.ReplaceAll(v, `"`, `""`) + `"`
		}
		parts[i] = v
	}
	return strings.Join(parts, ",")
}
