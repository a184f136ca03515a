// Package reqheader holds the rule for which destination headers a request
// never carries, shared by the core (stores refuse them on Put) and the
// HTTP sender (which drops them from destinations stored before the rule).
package reqheader

import "strings"

// Unsendable returns why a destination header name with value is never
// sent, or "" when it may be. The name is matched without regard to case.
//
// Refused are the connection-specific headers (RFC 9110 section 7.6.1,
// RFC 9113 section 8.2.2): Connection, Keep-Alive, Proxy-Connection,
// Transfer-Encoding, Upgrade, and TE with any value but "trailers". They
// describe one connection, which the sender manages, and Go's HTTP/2
// transport refuses a request that has some of them, at every send. Host is
// refused too: the request's host is the URL's, the one the SSRF guard
// checks, and Go would ignore a Host header silently.
func Unsendable(name, value string) string {
	switch {
	case strings.EqualFold(name, "Connection"),
		strings.EqualFold(name, "Keep-Alive"),
		strings.EqualFold(name, "Proxy-Connection"),
		strings.EqualFold(name, "Transfer-Encoding"),
		strings.EqualFold(name, "Upgrade"):
		return "is a connection-specific header, which the sender manages itself and HTTP/2 forbids"
	case strings.EqualFold(name, "TE") && !strings.EqualFold(strings.TrimSpace(value), "trailers"):
		return `is a connection-specific header, which HTTP/2 allows only as "trailers"`
	case strings.EqualFold(name, "Host"):
		return "cannot be set: the request's host is the URL's; put the host in the URL"
	}
	return ""
}
