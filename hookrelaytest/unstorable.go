package hookrelaytest

import (
	"context"
	"errors"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"

	"github.com/hookrelay/hookrelay"
	"github.com/hookrelay/hookrelay/internal/errtext"
)

// unstorableIDs are IDs no store can hold (not UTF-8, a NUL byte, over
// 255 bytes, 64 KiB) and one it can that a careless error message would
// print raw (a line break). IDs like these reach a store from outside: a
// URL of the console, a CLI argument, a message on a broker subject.
var unstorableIDs = []string{"\xff\xfe", "nul\x00inside", strings.Repeat("x", 256), strings.Repeat("y", 64<<10), "line\nbreak\r"}

// maxErrorBytes bounds an error message that names an ID: an error quotes
// a prefix of a long input, not all of it.
const maxErrorBytes = 1024

// RunUnstorableIDs checks that every read or change by ID treats an ID no
// record could have exactly as it treats an unknown one (the same
// not-found error, or the same empty answer), on the Ledger, the
// Destinations and the abilities the harness has (DestinationEnabler,
// DestinationBatchReader, LeaseLedger, RedriveLedger); and that an error
// naming such an ID prints it quoted: valid UTF-8, no control character,
// and a long one cut (at most maxErrorBytes in all).
// A store that hands such an ID to a database refusing it (PostgreSQL
// refuses bytes that are not UTF-8, and NUL) answers a database error
// instead.
func RunUnstorableIDs(t *testing.T, newHarness NewHarness) {
	ctx := context.Background()
	const unknown = "whd_missing"

	// same checks that got (for id) is what want (for unknown) was: both
	// nil, or both wrapping the same one of sentinels.
	same := func(t *testing.T, what, id string, want, got error, sentinels ...error) {
		t.Helper()
		kind := func(err error) string {
			if err == nil {
				return "no error"
			}
			for _, s := range sentinels {
				if errors.Is(err, s) {
					return s.Error()
				}
			}
			return "another error"
		}
		assert.Equal(t, kind(want), kind(got), "%s %s answers as for an unknown ID; got %.200v", what, errtext.Quote(id), got)
		if got != nil {
			msg := got.Error()
			assert.True(t, utf8.ValidString(msg), "%s %s: the error is not valid UTF-8: %s", what, errtext.Quote(id), errtext.QuoteN(msg, 200))
			assert.False(t, strings.ContainsFunc(msg, unicode.IsControl), "%s %s: the error holds a control character: %s", what, errtext.Quote(id), errtext.QuoteN(msg, 200))
			assert.LessOrEqual(t, len(msg), maxErrorBytes, "%s of a %d-byte ID: the error is %d bytes", what, len(id), len(msg))
		}
	}

	t.Run("Ledger", func(t *testing.T) {
		h := newHarness(t)
		_, want := h.Ledger.Get(ctx, unknown)
		wantDelivered, wantWas := h.Ledger.WasDelivered(ctx, unknown)
		wantAttempts, wantA := h.Ledger.Attempts(ctx, unknown)
		for _, id := range unstorableIDs {
			_, err := h.Ledger.Get(ctx, id)
			same(t, "Get", id, want, err, hookrelay.ErrNotFound)
			delivered, err := h.Ledger.WasDelivered(ctx, id)
			same(t, "WasDelivered", id, wantWas, err, hookrelay.ErrNotFound)
			assert.Equal(t, wantDelivered, delivered, "WasDelivered %s", errtext.Quote(id))
			attempts, err := h.Ledger.Attempts(ctx, id)
			same(t, "Attempts", id, wantA, err, hookrelay.ErrNotFound)
			assert.Len(t, attempts, len(wantAttempts), "Attempts %s", errtext.Quote(id))
		}
	})

	t.Run("Destinations", func(t *testing.T) {
		h := newHarness(t)
		_, want := h.Destinations.Destination(ctx, unknown)
		wantDisable := h.Destinations.Disable(ctx, hookrelay.DisableParams{ID: unknown, Reason: "gone", Now: base})
		wantPause := h.Destinations.SetPaused(ctx, unknown, true)
		for _, id := range unstorableIDs {
			_, err := h.Destinations.Destination(ctx, id)
			same(t, "Destination", id, want, err, hookrelay.ErrDestinationNotFound)
			err = h.Destinations.Disable(ctx, hookrelay.DisableParams{ID: id, Reason: "gone", Now: base})
			same(t, "Disable", id, wantDisable, err, hookrelay.ErrDestinationNotFound)
			err = h.Destinations.SetPaused(ctx, id, true)
			same(t, "SetPaused", id, wantPause, err, hookrelay.ErrDestinationNotFound)
		}
		if en, ok := hookrelay.As[hookrelay.DestinationEnabler](h.Destinations); ok {
			want := en.Enable(ctx, unknown)
			for _, id := range unstorableIDs {
				same(t, "Enable", id, want, en.Enable(ctx, id), hookrelay.ErrDestinationNotFound)
			}
		}
		if r, ok := hookrelay.As[hookrelay.DestinationBatchReader](h.Destinations); ok {
			got, err := r.DestinationsByID(ctx, append([]string{unknown}, unstorableIDs...))
			same(t, "DestinationsByID", "(all of them)", nil, err)
			assert.Empty(t, got, "DestinationsByID")
		}
	})

	t.Run("LeaseLedger", func(t *testing.T) {
		h := newHarness(t)
		ll, ok := hookrelay.As[hookrelay.LeaseLedger](h.Ledger)
		if !ok {
			t.Skipf("%T does not implement hookrelay.LeaseLedger", h.Ledger)
		}
		acquire := func(id string) error {
			_, err := ll.AcquireLease(ctx, hookrelay.AcquireLeaseParams{ID: id, Holder: "broker-worker", Now: base, LeaseFor: leaseFor})
			return err
		}
		release := func(id string) error {
			return ll.ReleaseLease(ctx, hookrelay.ReleaseLeaseParams{ID: id, Lease: hookrelay.Lease{Token: 1, ExpiresAt: base.Add(leaseFor)}, Now: base})
		}
		wantAcquire, wantRelease := acquire(unknown), release(unknown)
		for _, id := range unstorableIDs {
			same(t, "AcquireLease", id, wantAcquire, acquire(id), hookrelay.ErrNotFound, hookrelay.ErrInvalidState, hookrelay.ErrLeaseLost)
			same(t, "ReleaseLease", id, wantRelease, release(id), hookrelay.ErrNotFound, hookrelay.ErrInvalidState, hookrelay.ErrLeaseLost)
		}
	})

	t.Run("RedriveLedger", func(t *testing.T) {
		h := newHarness(t)
		rl, ok := hookrelay.As[hookrelay.RedriveLedger](h.Ledger)
		if !ok {
			t.Skipf("%T does not implement hookrelay.RedriveLedger", h.Ledger)
		}
		redrive := func(id string) error {
			_, _, err := rl.RedriveDelivery(ctx, hookrelay.RedriveDeliveryParams{ID: id, AuditID: "rdv_test", Now: base})
			return err
		}
		audit := func(id string) error {
			_, err := rl.RedriveAudit(ctx, id)
			return err
		}
		wantRedrive, wantAudit := redrive(unknown), audit(unknown)
		for _, id := range unstorableIDs {
			same(t, "RedriveDelivery", id, wantRedrive, redrive(id), hookrelay.ErrNotFound, hookrelay.ErrInvalidState)
			same(t, "RedriveAudit", id, wantAudit, audit(id), hookrelay.ErrRedriveNotFound)
		}
	})
}
