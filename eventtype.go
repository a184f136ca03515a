package hookrelay

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/hookrelay/hookrelay/internal/errtext"
)

// MaxEventTypeBytes bounds an event type and an event-type pattern.
const MaxEventTypeBytes = 255

// MatchEventType reports whether eventType matches pattern. Event types are
// dot-separated names such as "lease.payment_recorded". A pattern is one of:
//
//   - an exact event type: "lease.payment_recorded" matches only itself;
//   - a prefix followed by ".*": "lease.*" matches every event type that
//     starts with "lease." ("lease.payment_recorded", "lease.ended.early"),
//     but not "lease" itself nor "leases.created";
//   - "*": every event type.
//
// Matching is exact and case-sensitive. MatchEventType is pure; it does not
// validate pattern (ValidateEventTypePattern does): a malformed pattern
// matches what its literal reading says.
func MatchEventType(pattern, eventType string) bool {
	if pattern == "*" {
		return true
	}
	if prefix, ok := strings.CutSuffix(pattern, ".*"); ok {
		return len(eventType) > len(prefix)+1 && strings.HasPrefix(eventType, prefix+".")
	}
	return pattern == eventType
}

// SubscribesTo reports whether the destination receives events of the given
// type from Client.Publish: its EventTypes is empty (every type) or one of
// its patterns matches.
func (d Destination) SubscribesTo(eventType string) bool {
	if len(d.EventTypes) == 0 {
		return true
	}
	for _, p := range d.EventTypes {
		if MatchEventType(p, eventType) {
			return true
		}
	}
	return false
}

// ValidateEventTypes checks a destination's EventTypes, as destination
// stores do on Put. It returns a *ValidationError (unwrapping to
// ErrInvalidDestination) whose Field names the offending entry, e.g.
// "EventTypes[2]", and whose Problem quotes at most a short prefix of it.
func ValidateEventTypes(patterns []string) error {
	for i, p := range patterns {
		if problem := eventTypePatternProblem(p); problem != "" {
			return invalid(ErrInvalidDestination, fmt.Sprintf("EventTypes[%d]", i), problem)
		}
	}
	return nil
}

// eventTypePatternProblem says what is wrong with a pattern, or "" when it
// is well formed: "*", or dot-separated non-empty segments of printable
// characters without "*", of which the last may be "*".
func eventTypePatternProblem(p string) string {
	switch {
	case p == "":
		return "must not be empty"
	case len(p) > MaxEventTypeBytes:
		return fmt.Sprintf("is %d bytes, over the %d-byte limit", len(p), MaxEventTypeBytes)
	case !utf8.ValidString(p):
		return "is not valid UTF-8"
	case p == "*":
		return ""
	}
	segs := strings.Split(p, ".")
	for i, s := range segs {
		switch {
		case s == "":
			return fmt.Sprintf("%s has an empty segment (a leading, trailing or doubled dot)", quotePrefix(p))
		case s == "*" && i == len(segs)-1:
		case strings.Contains(s, "*"):
			return fmt.Sprintf(`%s: "*" may only be the whole pattern or its whole last segment, as in "lease.*"`, quotePrefix(p))
		case strings.IndexFunc(s, func(r rune) bool { return !unicode.IsPrint(r) || unicode.IsSpace(r) }) >= 0:
			return fmt.Sprintf("%s contains a space or a control character", quotePrefix(p))
		}
	}
	return ""
}

// quotePrefix quotes at most the first 40 bytes of s (cut on a rune
// boundary), so an error never echoes a long input.
func quotePrefix(s string) string { return errtext.QuoteN(s, 40) }
