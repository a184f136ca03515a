package hookrelay_test

import (
	"context"
	"errors"
	"math"
	"testing"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/mock/gomock"

	"github.com/hookrelay/hookrelay"
	"github.com/hookrelay/hookrelay/hookrelaymock"
	"github.com/hookrelay/hookrelay/hookrelaytest"
)

type mocks struct {
	queue  *hookrelaymock.MockQueue
	ledger *hookrelaymock.MockLedger
	sender *hookrelaymock.MockSender
	dests  *hookrelaymock.MockDestinations
	client *hookrelay.Client
	claim  hookrelay.Claim
	now    time.Time
}

func newMocks(t *testing.T) *mocks {
	ctrl := gomock.NewController(t)
	m := &mocks{
		queue: hookrelaymock.NewMockQueue(ctrl), ledger: hookrelaymock.NewMockLedger(ctrl),
		sender: hookrelaymock.NewMockSender(ctrl), dests: hookrelaymock.NewMockDestinations(ctrl),
	}
	clk := clock.NewMock()
	m.now = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	clk.Set(m.now)
	c, err := hookrelay.New(hookrelay.Config{
		Queue: m.queue, Ledger: m.ledger, Sender: m.sender, Destinations: m.dests,
		Clock: clk, Random: hookrelaytest.FixedRandom(0.5),
	})
	require.NoError(t, err)
	m.client = c
	id := hookrelay.DeliveryID("evt_1", "dest_1")
	m.claim = hookrelay.Claim{
		Delivery: hookrelay.Delivery{ID: id, EventID: "evt_1", TenantID: "t", DestinationID: "dest_1", Attempt: 1,
			PolicyVersion: "default", State: hookrelay.StatePending, FirstQueuedAt: m.now, NextAttemptAt: m.now},
		Lease: hookrelay.Lease{Token: 7, ExpiresAt: m.now.Add(time.Minute)},
	}
	return m
}

// sendReturns expects the ledger check, the destination lookup and one send
// carrying the claimed delivery ID.
func (m *mocks) sendReturns(res hookrelay.Result) []any {
	id := m.claim.Delivery.ID
	return []any{
		m.ledger.EXPECT().WasDelivered(gomock.Any(), id).Return(false, nil),
		m.dests.EXPECT().Destination(gomock.Any(), "dest_1").Return(hookrelay.Destination{ID: "dest_1"}, nil),
		m.sender.EXPECT().Send(gomock.Any(), gomock.Any()).DoAndReturn(func(_ context.Context, p hookrelay.SendParams) hookrelay.Result {
			if p.Delivery.ID != id {
				panic("send carried another ID")
			}
			return res
		}),
	}
}

func TestProcessRecordsDeliveredBeforeAcknowledging(t *testing.T) {
	m := newMocks(t)
	id := m.claim.Delivery.ID
	gomock.InOrder(append(m.sendReturns(hookrelay.Delivered(204)),
		m.ledger.EXPECT().MarkDelivered(gomock.Any(), gomock.Cond(func(p hookrelay.MarkDeliveredParams) bool {
			return p.ID == id && p.Lease.Token == 7 && p.Attempt.Number == 1 && p.Attempt.StatusCode == 204
		})).Return(nil),
		m.queue.EXPECT().Acknowledge(gomock.Any(), gomock.Cond(func(p hookrelay.AckParams) bool { return p.ID == id && p.Lease.Token == 7 })).Return(nil),
	)...)
	require.NoError(t, m.client.Process(context.Background(), m.claim))
}

func TestProcessRecordsRetryBeforeScheduling(t *testing.T) {
	m := newMocks(t)
	id := m.claim.Delivery.ID
	at := m.now.Add(500 * time.Millisecond)
	gomock.InOrder(append(m.sendReturns(hookrelay.Retryable(hookrelay.ReasonServerError).WithStatus(500)),
		m.ledger.EXPECT().RecordRetry(gomock.Any(), gomock.Cond(func(p hookrelay.RecordRetryParams) bool {
			return p.ID == id && p.NextAttempt == 2 && p.NextAttemptAt.Equal(at) && p.Attempt.Number == 1
		})).Return(nil),
		m.queue.EXPECT().RetryAt(gomock.Any(), gomock.Cond(func(p hookrelay.RetryAtParams) bool {
			return p.Delivery.ID == id && p.Delivery.Attempt == 2 && p.At.Equal(at) && string(p.Delivery.Payload) == string(m.claim.Delivery.Payload)
		})).Return(nil),
	)...)
	require.NoError(t, m.client.Process(context.Background(), m.claim))
}

func TestProcessRecordsDeadLetterBeforeMovingIt(t *testing.T) {
	m := newMocks(t)
	id := m.claim.Delivery.ID
	gomock.InOrder(append(m.sendReturns(hookrelay.Permanent(hookrelay.ReasonAuthRejected).WithStatus(401)),
		m.ledger.EXPECT().RecordDeadLetter(gomock.Any(), gomock.Cond(func(p hookrelay.RecordDeadLetterParams) bool {
			return p.ID == id && p.Reason == hookrelay.ReasonAuthRejected && p.Attempt != nil && p.Attempt.StatusCode == 401
		})).Return(nil),
		m.queue.EXPECT().DeadLetter(gomock.Any(), gomock.Cond(func(p hookrelay.DeadLetterParams) bool {
			return p.Delivery.ID == id && p.Reason == hookrelay.ReasonAuthRejected
		})).Return(nil),
	)...)
	require.NoError(t, m.client.Process(context.Background(), m.claim))
}

func TestProcessExhaustedBudgetDeadLetters(t *testing.T) {
	m := newMocks(t)
	m.claim.Delivery.Attempt = 7
	gomock.InOrder(append(m.sendReturns(hookrelay.Retryable(hookrelay.ReasonServerError)),
		m.ledger.EXPECT().RecordDeadLetter(gomock.Any(), gomock.Cond(func(p hookrelay.RecordDeadLetterParams) bool {
			return p.Reason == hookrelay.ReasonAttemptsExhausted && p.Attempt.Number == 7
		})).Return(nil),
		m.queue.EXPECT().DeadLetter(gomock.Any(), gomock.Any()).Return(nil),
	)...)
	require.NoError(t, m.client.Process(context.Background(), m.claim))
}

func TestProcessSendsNothingPastAShrunkenBudget(t *testing.T) {
	// The destination's policy went from 10 attempts to 3 while this
	// delivery waited for its fifth: its budget is spent, so it is
	// dead-lettered without another request.
	m := newMocks(t)
	id := m.claim.Delivery.ID
	m.claim.Delivery.Attempt, m.claim.Delivery.PolicyVersion = 5, "patient-v1"
	shrunk := &hookrelay.Policy{Version: "patient-v2", MaxAttempts: 3, BaseDelay: time.Second, MaxDelay: time.Minute}
	gomock.InOrder(
		m.ledger.EXPECT().WasDelivered(gomock.Any(), id).Return(false, nil),
		m.dests.EXPECT().Destination(gomock.Any(), "dest_1").Return(hookrelay.Destination{ID: "dest_1", Policy: shrunk}, nil),
		m.ledger.EXPECT().RecordDeadLetter(gomock.Any(), gomock.Cond(func(p hookrelay.RecordDeadLetterParams) bool {
			return p.ID == id && p.Reason == hookrelay.ReasonAttemptsExhausted && p.Attempt == nil
		})).Return(nil),
		m.queue.EXPECT().DeadLetter(gomock.Any(), gomock.Cond(func(p hookrelay.DeadLetterParams) bool {
			return p.Delivery.ID == id && p.Reason == hookrelay.ReasonAttemptsExhausted
		})).Return(nil),
	)
	// No Send: the mock sender fails the test if it is called.
	require.NoError(t, m.client.Process(context.Background(), m.claim))
}

func TestProcessAcknowledgesADuplicateWithoutSending(t *testing.T) {
	m := newMocks(t)
	gomock.InOrder(
		m.ledger.EXPECT().WasDelivered(gomock.Any(), m.claim.Delivery.ID).Return(true, nil),
		m.queue.EXPECT().Acknowledge(gomock.Any(), gomock.Any()).Return(nil),
	)
	// No Send, no ledger write: the mocks fail the test on any other call.
	require.NoError(t, m.client.Process(context.Background(), m.claim))
}

func TestProcessNeverAcknowledgesWhenTheLedgerWriteFails(t *testing.T) {
	for _, tc := range []struct {
		name   string
		result hookrelay.Result
		expect func(m *mocks) *gomock.Call
	}{
		{"delivered", hookrelay.Delivered(200), func(m *mocks) *gomock.Call {
			return m.ledger.EXPECT().MarkDelivered(gomock.Any(), gomock.Any()).Return(errors.New("db down"))
		}},
		{"retry", hookrelay.Retryable(hookrelay.ReasonServerError), func(m *mocks) *gomock.Call {
			return m.ledger.EXPECT().RecordRetry(gomock.Any(), gomock.Any()).Return(errors.New("db down"))
		}},
		{"dead", hookrelay.Permanent(hookrelay.ReasonBadRequest), func(m *mocks) *gomock.Call {
			return m.ledger.EXPECT().RecordDeadLetter(gomock.Any(), gomock.Any()).Return(errors.New("db down"))
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := newMocks(t)
			gomock.InOrder(append(m.sendReturns(tc.result), tc.expect(m))...)
			// No queue transition is expected: the mock fails on any.
			err := m.client.Process(context.Background(), m.claim)
			var op *hookrelay.OpError
			require.ErrorAs(t, err, &op)
			assert.Equal(t, m.claim.Delivery.ID, op.DeliveryID, "the error names the delivery")
		})
	}
}

func TestProcessDeadLettersAPastWindowDeliveryOfAPausedDestination(t *testing.T) {
	// The destination was paused past the delivery's window: the delivery
	// can never be sent, so it is dead-lettered now rather than held as
	// pending (and released every PausedRecheck) until someone resumes.
	for _, dest := range []hookrelay.Destination{
		{ID: "dest_1", Paused: true},
		{ID: "dest_1", Disabled: true, DisabledReason: "too many failures"},
	} {
		m := newMocks(t)
		id := m.claim.Delivery.ID
		m.claim.Delivery.FirstQueuedAt, m.claim.Delivery.PolicyVersion = m.now.Add(-2*time.Hour), "windowed"
		dest.Policy = &hookrelay.Policy{Version: "windowed", MaxAttempts: 5, BaseDelay: time.Second, MaxDelay: time.Minute, MaxAge: time.Hour}
		gomock.InOrder(
			m.ledger.EXPECT().WasDelivered(gomock.Any(), id).Return(false, nil),
			m.dests.EXPECT().Destination(gomock.Any(), "dest_1").Return(dest, nil),
			m.ledger.EXPECT().RecordDeadLetter(gomock.Any(), gomock.Cond(func(p hookrelay.RecordDeadLetterParams) bool {
				return p.ID == id && p.Reason == hookrelay.ReasonWindowExpired && p.Attempt == nil
			})).Return(nil),
			m.queue.EXPECT().DeadLetter(gomock.Any(), gomock.Cond(func(p hookrelay.DeadLetterParams) bool {
				return p.Delivery.ID == id && p.Reason == hookrelay.ReasonWindowExpired
			})).Return(nil),
		)
		// No Send and no Release: the mocks fail the test on either.
		require.NoError(t, m.client.Process(context.Background(), m.claim))
	}
}

func TestProcessReleasesAPausedDestinationsDeliveryNoLaterThanAStoreCanHold(t *testing.T) {
	// A PausedRecheck of centuries would put the release past what SQL
	// stores keep (int64 nanoseconds): the refused release would leave
	// the delivery to be claimed again at every lease's end.
	m := newMocks(t)
	clk := clock.NewMock()
	clk.Set(m.now)
	c, err := hookrelay.New(hookrelay.Config{
		Queue: m.queue, Ledger: m.ledger, Sender: m.sender, Destinations: m.dests,
		Clock: clk, PausedRecheck: time.Duration(math.MaxInt64),
	})
	require.NoError(t, err)
	id := m.claim.Delivery.ID
	gomock.InOrder(
		m.ledger.EXPECT().WasDelivered(gomock.Any(), id).Return(false, nil),
		m.dests.EXPECT().Destination(gomock.Any(), "dest_1").Return(hookrelay.Destination{ID: "dest_1", Paused: true}, nil),
		m.queue.EXPECT().Release(gomock.Any(), gomock.Cond(func(p hookrelay.ReleaseParams) bool {
			return p.ID == id && p.At.After(m.now) && hookrelay.CheckStorable(hookrelay.Delivery{ID: id, NextAttemptAt: p.At}) == nil
		})).Return(nil),
	)
	require.NoError(t, c.Process(context.Background(), m.claim))
}
