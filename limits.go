package hookrelay

import (
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/hookrelay/hookrelay/internal/errtext"
)

// Bounds of EnqueueParams.Scope, checked by Client.Prepare (and so by
// Enqueue, EnqueueMany and the SQL adapter's EnqueueTx). Scope labels are
// stored on every record and logged with every event, so they stay small.
const (
	// MaxScopeLabels is the most labels one delivery's Scope may hold.
	MaxScopeLabels = 64
	// MaxScopeKeyBytes is the longest a Scope key may be, in bytes.
	MaxScopeKeyBytes = 255
	// MaxScopeValueBytes is the longest a Scope value may be, in bytes.
	MaxScopeValueBytes = 1024
)

// quote returns s quoted for an error message: at most its first
// errtext.QuoteMax bytes, so that an over-long input cannot make an
// over-long error.
func quote(s string) string { return errtext.Quote(s) }

// unstorableText says why no store can keep s as an ID or label (bytes
// that are not UTF-8, a NUL byte: PostgreSQL refuses both in TEXT), or ""
// when it can. Prepare refuses such text itself, so that an event is
// refused the same way whether it reaches one destination, many or none
// (a Publish to a tenant without subscribers stores nothing, and an ID
// that is not UTF-8 is not "not found").
func unstorableText(s string) string {
	switch {
	case !utf8.ValidString(s):
		return "is not valid UTF-8"
	case strings.IndexByte(s, 0) >= 0:
		return "contains a NUL byte"
	}
	return ""
}

// checkScope refuses a Scope over MaxScopeLabels labels, with a key or
// value over its size limit or not valid UTF-8 (JSON, which stores keep
// Scope as, cannot hold it); the error names the label by a short prefix
// of its key.
func checkScope(scope map[string]string) error {
	if len(scope) > MaxScopeLabels {
		return invalid(ErrInvalidDelivery, "Scope", fmt.Sprintf("has %d labels, over the %d-label limit", len(scope), MaxScopeLabels))
	}
	for k, v := range scope {
		switch {
		case !utf8.ValidString(k):
			return invalid(ErrInvalidDelivery, "Scope", fmt.Sprintf("key %s is not valid UTF-8", quote(k)))
		case !utf8.ValidString(v):
			return invalid(ErrInvalidDelivery, "Scope", fmt.Sprintf("value of %s is not valid UTF-8", quote(k)))
		case len(k) > MaxScopeKeyBytes:
			return invalid(ErrInvalidDelivery, "Scope", fmt.Sprintf("key %s is %d bytes, over the %d-byte limit", quote(k), len(k), MaxScopeKeyBytes))
		case len(v) > MaxScopeValueBytes:
			return invalid(ErrInvalidDelivery, "Scope", fmt.Sprintf("value of %s is %d bytes, over the %d-byte limit", quote(k), len(v), MaxScopeValueBytes))
		}
	}
	return nil
}

// shortNotFound replaces an adapter's destination-not-found error, whose
// text repeats the whole ID, with the bare sentinel; the caller's message
// names the destination by a prefix.
func shortNotFound(err error) error {
	if errors.Is(err, ErrDestinationNotFound) {
		return ErrDestinationNotFound
	}
	return err
}
