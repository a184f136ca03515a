package hookrelay

import (
	"errors"
	"fmt"

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

// checkScope refuses a Scope over MaxScopeLabels labels, or with a key or
// value over its size limit; the error names the label by a short prefix
// of its key.
func checkScope(scope map[string]string) error {
	if len(scope) > MaxScopeLabels {
		return invalid(ErrInvalidDelivery, "Scope", fmt.Sprintf("has %d labels, over the %d-label limit", len(scope), MaxScopeLabels))
	}
	for k, v := range scope {
		switch {
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
