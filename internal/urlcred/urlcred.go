// Package urlcred reads a URL's credentials as its text spells them,
// shared by the SQL adapter (DSN passwords kept out of errors) and the
// HTTP sender (URL credentials kept out of a Result's Detail).
package urlcred

import "strings"

// Raw returns the user name and password of raw's authority exactly as
// written, escapes included: url.Parse decodes them, and escaping them
// again need not give the text back (%2f comes back as %2F, %20 as +), so
// a message quoting the URL as written would keep them. The authority is
// what follows "//" up to the first '/', '?' or '#'; its user information
// is all before its last '@' (a password may hold one), split at the first
// ':'. ok is false when raw has no user information.
func Raw(raw string) (name, password string, ok bool) {
	_, rest, found := strings.Cut(raw, "//")
	if !found {
		return "", "", false
	}
	if end := strings.IndexAny(rest, "/?#"); end >= 0 {
		rest = rest[:end]
	}
	at := strings.LastIndex(rest, "@")
	if at < 0 {
		return "", "", false
	}
	name, password, _ = strings.Cut(rest[:at], ":")
	return name, password, true
}
