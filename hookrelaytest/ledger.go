package hookrelaytest

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hookrelay/hookrelay"
)

// RunLedger runs the Ledger contract tests: records round-trip, create is
// idempotent, every write keeps the attempt history.
func RunLedger(t *testing.T, newHarness NewHarness) {
	ctx := context.Background()

	t.Run("CreateRoundTripsEveryField", func(t *testing.T) {
		h := newHarness(t)
		d := newDelivery("evt_1", "dest_1", base)
		d.Payload = []byte{0, 1, 2, 0xff, '{', '}'} // opaque bytes, not text
		created, err := h.Ledger.Create(ctx, []hookrelay.Delivery{d})
		require.NoError(t, err)
		assert.Equal(t, []bool{true}, created)
		got, err := h.Ledger.Get(ctx, d.ID)
		require.NoError(t, err)
		assertSameDelivery(t, d, got)
	})

	t.Run("CreateIsIdempotentByDeliveryID", func(t *testing.T) {
		h := newHarness(t)
		d := newDelivery("evt_1", "dest_1", base)
		other := newDelivery("evt_2", "dest_1", base)
		changed := d
		changed.Payload = []byte(`{"edited":true}`)
		created, err := h.Ledger.Create(ctx, []hookrelay.Delivery{d})
		require.NoError(t, err)
		assert.Equal(t, []bool{true}, created)
		created, err = h.Ledger.Create(ctx, []hookrelay.Delivery{changed, other, other})
		require.NoError(t, err)
		assert.Equal(t, []bool{false, true, false}, created, "existing and in-batch duplicates are not created")
		got, err := h.Ledger.Get(ctx, d.ID)
		require.NoError(t, err)
		assert.Equal(t, d.Payload, got.Payload, "a repeated enqueue never edits the stored payload")
	})

	t.Run("UnknownIDs", func(t *testing.T) {
		h := newHarness(t)
		_, err := h.Ledger.Get(ctx, "whd_missing")
		assert.ErrorIs(t, err, hookrelay.ErrNotFound)
		delivered, err := h.Ledger.WasDelivered(ctx, "whd_missing")
		assert.NoError(t, err)
		assert.False(t, delivered)
		_, err = h.Ledger.Attempts(ctx, "whd_missing")
		assert.ErrorIs(t, err, hookrelay.ErrNotFound)
	})

	t.Run("MarkDeliveredKeepsTheAttempt", func(t *testing.T) {
		h := newHarness(t)
		d := newDelivery("evt_1", "dest_1", base)
		seed(t, h, d)
		c := claim(t, h.Queue, base, 1)[0]
		now := base.Add(250 * time.Millisecond)
		require.NoError(t, deliver(t, h, c, now))
		delivered, err := h.Ledger.WasDelivered(ctx, d.ID)
		require.NoError(t, err)
		assert.True(t, delivered)
		got, err := h.Ledger.Get(ctx, d.ID)
		require.NoError(t, err)
		assert.Equal(t, hookrelay.StateDelivered, got.State)
		assert.Equal(t, hookrelay.OutcomeAccepted, got.LastOutcome)
		assert.True(t, got.UpdatedAt.Equal(now))
		attempts, err := h.Ledger.Attempts(ctx, d.ID)
		require.NoError(t, err)
		require.Len(t, attempts, 1)
		assert.Equal(t, 1, attempts[0].Number)
		assert.Equal(t, hookrelay.KindDelivered, attempts[0].Kind)
		assert.Equal(t, 204, attempts[0].StatusCode)
		assert.Equal(t, d.ID, attempts[0].DeliveryID)
	})

	t.Run("RecordRetryAdvancesTheAttemptAndKeepsHistory", func(t *testing.T) {
		h := newHarness(t)
		d := newDelivery("evt_1", "dest_1", base)
		seed(t, h, d)
		now := base
		for n := 1; n <= 3; n++ {
			cs := claim(t, h.Queue, now, 1)
			require.Len(t, cs, 1, "attempt %d due", n)
			require.Equal(t, n, cs[0].Delivery.Attempt)
			next := now.Add(time.Duration(n) * time.Second)
			require.NoError(t, retry(t, h, cs[0], now, next))
			now = next
		}
		got, err := h.Ledger.Get(ctx, d.ID)
		require.NoError(t, err)
		assert.Equal(t, 4, got.Attempt)
		assert.True(t, got.NextAttemptAt.Equal(now))
		assert.Equal(t, hookrelay.OutcomeRejected, got.LastOutcome)
		assert.Equal(t, hookrelay.ReasonServerError, got.LastReason)
		attempts, err := h.Ledger.Attempts(ctx, d.ID)
		require.NoError(t, err)
		require.Len(t, attempts, 3)
		for i, a := range attempts {
			assert.Equal(t, i+1, a.Number, "attempts in order")
			assert.Equal(t, hookrelay.KindRetryable, a.Kind)
			assert.Equal(t, 500, a.StatusCode)
		}
	})

	t.Run("DeadLetterWithoutAnAttempt", func(t *testing.T) {
		h := newHarness(t)
		d := newDelivery("evt_1", "dest_1", base)
		seed(t, h, d)
		c := claim(t, h.Queue, base, 1)[0]
		require.NoError(t, h.Ledger.RecordDeadLetter(ctx, hookrelay.RecordDeadLetterParams{
			ID: d.ID, Lease: c.Lease, Reason: hookrelay.ReasonWindowExpired, Now: base,
		}))
		got, err := h.Ledger.Get(ctx, d.ID)
		require.NoError(t, err)
		assert.Equal(t, hookrelay.StateDead, got.State)
		assert.Equal(t, hookrelay.ReasonWindowExpired, got.LastReason)
		attempts, err := h.Ledger.Attempts(ctx, d.ID)
		require.NoError(t, err)
		assert.Empty(t, attempts)
	})

	t.Run("DeadIsNotMarkedDelivered", func(t *testing.T) {
		h := newHarness(t)
		d := newDelivery("evt_1", "dest_1", base)
		seed(t, h, d)
		c := claim(t, h.Queue, base, 1)[0]
		require.NoError(t, kill(t, h, c, hookrelay.ReasonBadRequest, base))
		err := h.Ledger.MarkDelivered(ctx, hookrelay.MarkDeliveredParams{ID: d.ID, Lease: c.Lease, Attempt: attemptFor(c, hookrelay.KindDelivered, base), Now: base})
		assert.ErrorIs(t, err, hookrelay.ErrInvalidState)
		delivered, err := h.Ledger.WasDelivered(ctx, d.ID)
		require.NoError(t, err)
		assert.False(t, delivered)
	})

	t.Run("AttemptDetailRoundTrips", func(t *testing.T) {
		h := newHarness(t)
		d := newDelivery("evt_1", "dest_1", base)
		seed(t, h, d)
		c := claim(t, h.Queue, base, 1)[0]
		a := hookrelay.Attempt{
			DeliveryID: d.ID, Number: 1, StartedAt: base, FinishedAt: base.Add(1234 * time.Millisecond),
			Kind: hookrelay.KindRetryable, Outcome: hookrelay.OutcomeUnknown, Reason: hookrelay.ReasonTimeout,
			Detail: "read tcp: i/o timeout", NextAttemptAt: base.Add(2 * time.Second),
		}
		require.NoError(t, h.Ledger.RecordRetry(ctx, hookrelay.RecordRetryParams{
			ID: d.ID, Lease: c.Lease, Attempt: a, NextAttempt: 2, NextAttemptAt: a.NextAttemptAt, Now: a.FinishedAt,
		}))
		attempts, err := h.Ledger.Attempts(ctx, d.ID)
		require.NoError(t, err)
		require.Len(t, attempts, 1)
		got := attempts[0]
		assert.Equal(t, a.Outcome, got.Outcome)
		assert.Equal(t, a.Reason, got.Reason)
		assert.Equal(t, a.Detail, got.Detail)
		assert.True(t, got.StartedAt.Equal(a.StartedAt))
		assert.True(t, got.FinishedAt.Equal(a.FinishedAt))
		assert.True(t, got.NextAttemptAt.Equal(a.NextAttemptAt))
	})

	t.Run("LongOrMalformedTextIsRecordedAsStorableText", func(t *testing.T) {
		// A Sender or Classifier may write any diagnostic: megabytes of
		// response body, bytes that are not UTF-8, a NUL. The attempt is
		// still recorded (never refused, so the delivery is not retried
		// for want of a ledger row), with the text as StorableText makes
		// it: valid UTF-8, cut at a rune boundary to MaxStoredTextBytes.
		h := newHarness(t)
		long := strings.Repeat("é", hookrelay.MaxStoredTextBytes) // 2-byte runes: the cut falls inside one
		odd := "bad\xffbyte\x00" + strings.Repeat("世", hookrelay.MaxStoredTextBytes/2)
		retried, delivered, dead := newDelivery("evt_1", "dest_1", base), newDelivery("evt_2", "dest_1", base), newDelivery("evt_3", "dest_1", base)
		seed(t, h, retried, delivered, dead)
		cs := claim(t, h.Queue, base, 3)
		require.Len(t, cs, 3)
		byID := map[string]hookrelay.Claim{}
		for _, c := range cs {
			byID[c.Delivery.ID] = c
		}
		at := base.Add(time.Second)
		a := attemptFor(byID[retried.ID], hookrelay.KindRetryable, at)
		a.Reason, a.Detail = long, odd
		require.NoError(t, h.Ledger.RecordRetry(ctx, hookrelay.RecordRetryParams{
			ID: retried.ID, Lease: byID[retried.ID].Lease, Attempt: a, NextAttempt: 2, NextAttemptAt: at.Add(time.Minute), Now: at,
		}), "a long diagnostic must not cost the attempt its record")
		a = attemptFor(byID[delivered.ID], hookrelay.KindDelivered, at)
		a.Outcome, a.StatusCode, a.Reason, a.Detail = hookrelay.OutcomeAccepted, 200, long, odd
		require.NoError(t, h.Ledger.MarkDelivered(ctx, hookrelay.MarkDeliveredParams{ID: delivered.ID, Lease: byID[delivered.ID].Lease, Attempt: a, Now: at}))
		a = attemptFor(byID[dead.ID], hookrelay.KindPermanent, at)
		a.Reason, a.Detail = odd, long
		require.NoError(t, h.Ledger.RecordDeadLetter(ctx, hookrelay.RecordDeadLetterParams{ID: dead.ID, Lease: byID[dead.ID].Lease, Reason: long + long, Attempt: &a, Now: at}))

		for _, c := range []struct {
			id, reason, detail, lastReason string
		}{
			{retried.ID, long, odd, long},
			{delivered.ID, long, odd, long},
			{dead.ID, odd, long, long + long},
		} {
			attempts, err := h.Ledger.Attempts(ctx, c.id)
			require.NoError(t, err)
			require.Len(t, attempts, 1, "delivery %s", c.id)
			for _, f := range []struct{ name, got, wrote string }{
				{"Reason", attempts[0].Reason, c.reason}, {"Detail", attempts[0].Detail, c.detail},
			} {
				assert.True(t, utf8.ValidString(f.got), "delivery %s: the attempt's %s is stored as valid UTF-8", c.id, f.name)
				assert.LessOrEqual(t, len(f.got), hookrelay.MaxStoredTextBytes, "delivery %s: the attempt's %s", c.id, f.name)
				assert.True(t, f.got == hookrelay.StorableText(f.wrote), "delivery %s: the attempt's %s is StorableText of what was written (%d bytes stored, %d expected)",
					c.id, f.name, len(f.got), len(hookrelay.StorableText(f.wrote)))
			}
			got, err := h.Ledger.Get(ctx, c.id)
			require.NoError(t, err)
			assert.True(t, got.LastReason == hookrelay.StorableText(c.lastReason), "delivery %s: LastReason is StorableText of the reason written (%d bytes stored, %d expected)",
				c.id, len(got.LastReason), len(hookrelay.StorableText(c.lastReason)))
		}
	})

	t.Run("TheDeliveringAttemptRoundTripsEveryField", func(t *testing.T) {
		// As a worker writes it (Now is when the attempt finished), and
		// as a caller may (Now later than that).
		for _, after := range []time.Duration{0, time.Second} {
			h := newHarness(t)
			d := newDelivery("evt_1", "dest_1", base)
			seed(t, h, d)
			c := claim(t, h.Queue, base, 1)[0]
			a := hookrelay.Attempt{
				DeliveryID: d.ID, Number: c.Delivery.Attempt, StartedAt: base.Add(10 * time.Millisecond), FinishedAt: base.Add(1234 * time.Millisecond),
				Kind: hookrelay.KindDelivered, Outcome: hookrelay.OutcomeAccepted, Reason: "accepted_late", StatusCode: 202,
				Detail: "queued as job 7",
			}
			require.NoError(t, h.Ledger.MarkDelivered(ctx, hookrelay.MarkDeliveredParams{ID: d.ID, Lease: c.Lease, Attempt: a, Now: a.FinishedAt.Add(after)}))
			attempts, err := h.Ledger.Attempts(ctx, d.ID)
			require.NoError(t, err)
			require.Len(t, attempts, 1)
			assertSameAttempt(t, a, attempts[0], fmt.Sprintf("recorded %v after it finished", after))
		}
	})

	t.Run("AHistoryEndsWithTheAttemptThatDelivered", func(t *testing.T) {
		h := newHarness(t)
		d := newDelivery("evt_1", "dest_1", base)
		seed(t, h, d)
		now := base
		var written []hookrelay.Attempt
		for n := 1; n <= 2; n++ {
			c := claim(t, h.Queue, now, 1)[0]
			next := now.Add(time.Second)
			require.NoError(t, retry(t, h, c, now, next))
			written = append(written, attemptFor(c, hookrelay.KindRetryable, now))
			now = next
		}
		c := claim(t, h.Queue, now, 1)[0]
		require.NoError(t, deliver(t, h, c, now))
		a := attemptFor(c, hookrelay.KindDelivered, now)
		a.Outcome, a.Reason, a.StatusCode = hookrelay.OutcomeAccepted, "", 204
		written = append(written, a)
		attempts, err := h.Ledger.Attempts(ctx, d.ID)
		require.NoError(t, err)
		require.Len(t, attempts, len(written))
		for i := range written {
			assertSameAttempt(t, written[i], attempts[i], fmt.Sprintf("attempt %d", i+1))
		}
	})

	runRecordContract(t, newHarness)
}
