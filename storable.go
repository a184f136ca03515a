package hookrelay

import (
	"fmt"
	"math"
	"strings"
	"time"
	"unicode/utf8"
)

// Storage limits every Ledger enforces at Create (see CheckStorable), so a
// record the memory fake accepts is one the SQL store accepts too.
const (
	// MaxStoredStringBytes bounds the ID, EventID, TenantID,
	// DestinationID, EventType and PolicyVersion of a stored record.
	MaxStoredStringBytes = 255
	// MaxStoredScopeBytes bounds a record's Scope: the bytes of all its
	// keys and values together. It is what the largest Scope that
	// Client.Prepare accepts can hold (MaxScopeLabels labels of
	// MaxScopeKeyBytes and MaxScopeValueBytes), so the store never refuses
	// what the client let through.
	MaxStoredScopeBytes = MaxScopeLabels * (MaxScopeKeyBytes + MaxScopeValueBytes)
	// MaxStoredTextBytes bounds the free text a store keeps: an attempt's
	// Reason and Detail, a delivery's LastReason, a destination's
	// DisabledReason, a redrive's Actor, Reason and Error. It is what the
	// smallest text column of every SQL dialect holds (a MySQL BLOB).
	// Longer text is not refused, so no attempt goes unrecorded because a
	// Sender or Classifier wrote a long diagnostic: every store keeps
	// StorableText of it.
	MaxStoredTextBytes = 1<<16 - 1
)

// StorableText is free text as every store keeps it: invalid UTF-8 and
// NUL bytes each become U+FFFD, and text over MaxStoredTextBytes is cut
// at a rune boundary to at most that many bytes. Stores apply it to the
// fields MaxStoredTextBytes names, so what a test reads back from the
// memory store is what the SQL store returns.
func StorableText(s string) string {
	if unstorableText(s) != "" {
		s = strings.ReplaceAll(strings.ToValidUTF8(s, "\uFFFD"), "\x00", "\uFFFD")
	}
	if len(s) <= MaxStoredTextBytes {
		return s
	}
	cut := MaxStoredTextBytes
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut]
}

// storableTimes is the range of times every Ledger stores exactly: what
// int64 nanoseconds since 1970 hold.
var (
	minStorableTime = time.Unix(0, math.MinInt64+1)
	maxStorableTime = time.Unix(0, math.MaxInt64)
)

// CheckStorable returns a *ValidationError (wrapping ErrInvalidDelivery)
// naming the first field of d that a Ledger must refuse at Create: an
// empty ID; an ID, EventID, TenantID, DestinationID, EventType or
// PolicyVersion over MaxStoredStringBytes, not valid UTF-8 or holding a NUL
// byte; a Scope key or value that is not valid UTF-8, or a Scope over
// MaxStoredScopeBytes; an EnvelopeVersion this library does not know; a
// FirstQueuedAt, NextAttemptAt or UpdatedAt outside the years 1678 to 2262
// (zero is allowed). These are what a TEXT column of every SQL dialect and
// int64 nanoseconds hold exactly. Every Ledger, the memory fake included,
// calls it (or applies the same rules) so that tests passing on one store
// do not fail on another. Client.Prepare already refuses most of these;
// records written by EnqueueTx or by hand reach the store unchecked.
func CheckStorable(d Delivery) error {
	for _, f := range []struct {
		name, v string
	}{
		{"ID", d.ID}, {"EventID", d.EventID}, {"TenantID", d.TenantID},
		{"DestinationID", d.DestinationID}, {"EventType", d.EventType}, {"PolicyVersion", d.PolicyVersion},
	} {
		switch {
		case f.name == "ID" && f.v == "":
			return invalid(ErrInvalidDelivery, f.name, "must not be empty")
		case len(f.v) > MaxStoredStringBytes:
			return invalid(ErrInvalidDelivery, f.name, fmt.Sprintf("is %d bytes, over the %d-byte limit", len(f.v), MaxStoredStringBytes))
		case unstorableText(f.v) != "":
			return invalid(ErrInvalidDelivery, f.name, unstorableText(f.v))
		}
	}
	size := 0
	for k, v := range d.Scope {
		if !utf8.ValidString(k) || !utf8.ValidString(v) {
			return invalid(ErrInvalidDelivery, "Scope", fmt.Sprintf("label %q is not valid UTF-8", shortPrefix(k)))
		}
		size += len(k) + len(v)
	}
	if size > MaxStoredScopeBytes {
		return invalid(ErrInvalidDelivery, "Scope", fmt.Sprintf("is %d bytes, over the %d-byte limit", size, MaxStoredScopeBytes))
	}
	if d.EnvelopeVersion < 0 || d.EnvelopeVersion > EnvelopeVersion {
		return invalid(ErrInvalidDelivery, "EnvelopeVersion", fmt.Sprintf("%d is unknown (this library writes versions 1 to %d)", d.EnvelopeVersion, EnvelopeVersion))
	}
	for _, t := range []struct {
		name string
		t    time.Time
	}{{"FirstQueuedAt", d.FirstQueuedAt}, {"NextAttemptAt", d.NextAttemptAt}, {"UpdatedAt", d.UpdatedAt}} {
		if !t.t.IsZero() && (t.t.Before(minStorableTime) || t.t.After(maxStorableTime)) {
			return invalid(ErrInvalidDelivery, t.name, t.t.Format(time.RFC3339)+" is outside the storable range (years 1678 to 2262)")
		}
	}
	return nil
}

// shortPrefix is at most the first 32 bytes of s, for error messages.
func shortPrefix(s string) string {
	if len(s) <= 32 {
		return s
	}
	return s[:32] + "…"
}
