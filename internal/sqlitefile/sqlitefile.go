// Package sqlitefile spells a SQLite file path as the file: URI that
// opens that file, for the SQL store and the CLI (which opens a file
// read-only with its own URI parameters).
package sqlitefile

import "strings"

// URI is the file: URI of the file path names, without parameters.
// SQLite decodes %XX in a URI's path and reads a path after "file://" as
// starting with an authority, so '%' is escaped and an absolute path gets
// an empty authority ("file:///…"): a name like "100%.db" or "//data/x.db"
// opens that file.
func URI(path string) string {
	path = strings.ReplaceAll(path, "%", "%25")
	if strings.HasPrefix(path, "/") {
		return "file://" + path
	}
	return "file:" + path
}
