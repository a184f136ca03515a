// Package errtext formats inputs for error messages, for the core and the
// adapters alike.
package errtext

import (
	"fmt"
	"unicode"
	"unicode/utf8"
)

// QuoteMax is how much of an input Quote keeps.
const QuoteMax = 64

// Quote returns s quoted as %q does (so an error is one line of valid
// UTF-8 whatever s holds), at most its first QuoteMax bytes (cut on a rune
// boundary, "…" marking the cut), so that an over-long input cannot make an
// over-long error.
func Quote(s string) string { return QuoteN(s, QuoteMax) }

// QuoteN is Quote keeping at most n bytes of s.
func QuoteN(s string, n int) string {
	if len(s) <= n {
		return fmt.Sprintf("%q", s)
	}
	cut := n
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return fmt.Sprintf("%q…", s[:cut])
}

// Plain reports whether s can stand unquoted in an error message: at most
// QuoteMax bytes of printable UTF-8 without spaces, not empty (an ID as
// this library makes them).
func Plain(s string) bool {
	if s == "" || len(s) > QuoteMax || !utf8.ValidString(s) {
		return false
	}
	for _, r := range s {
		if !unicode.IsPrint(r) || unicode.IsSpace(r) {
			return false
		}
	}
	return true
}
