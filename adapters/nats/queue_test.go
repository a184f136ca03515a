package hooknats_test

import (
	"bytes"
	"context"
	"errors"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hookrelay/hookrelay"
	"github.com/hookrelay/hookrelay/adapters/memory"
	hooknats "github.com/hookrelay/hookrelay/adapters/nats"
	"github.com/hookrelay/hookrelay/hookrelaytest"
	"github.com/hookrelay/hookrelay/internal/brokertest"
)

// crashingQueue stands for a worker process that dies right after the
// ledger write, before it acknowledges the message.
type crashingQueue struct{ hookrelay.Queue }

var errCrash = errors.New("worker killed before the acknowledgement")

func (crashingQueue) Acknowledge(context.Context, hookrelay.AckParams) error { return errCrash }

// settled reports whether the work stream holds no message at all: none
// waiting, none handed out.
func settled(t *testing.T, js jetstream.JetStream, cfg hooknats.Config) bool {
	t.Helper()
	s, err := js.Stream(context.Background(), cfg.Stream)
	require.NoError(t, err)
	info, err := s.Info(context.Background())
	require.NoError(t, err)
	return info.State.Msgs == 0
}

func TestCrashBetweenLedgerWriteAndAckIsAbsorbedByTheLedger(t *testing.T) {
	ctx := context.Background()
	js := connect(t)
	cfg := testConfig(t, js)
	cfg.AckWait = 2 * time.Second // the server redelivers the dead worker's message after this
	ledger := memory.NewStore()
	rec := &hookrelaytest.Recipient{}

	// The first worker has its own connection, which dies with it.
	nc1, err := nats.Connect(connectURL(t))
	require.NoError(t, err)
	js1, err := jetstream.New(nc1)
	require.NoError(t, err)
	q1 := newQueue(t, js1, ledger, cfg)
	c1 := brokertest.NewClient(t, crashingQueue{q1}, ledger, rec)
	id := brokertest.Enqueue(t, c1, "evt_crash")
	cs, err := q1.Claim(ctx, hookrelay.ClaimParams{Now: time.Now(), Limit: 1, LeaseFor: time.Second, Holder: "doomed"})
	require.NoError(t, err)
	require.Len(t, cs, 1)
	require.ErrorIs(t, c1.Process(ctx, cs[0]), errCrash)
	nc1.Close() // killed: the message was never acknowledged
	d, err := ledger.Get(ctx, id)
	require.NoError(t, err)
	require.Equal(t, hookrelay.StateDelivered, d.State, "the ledger write happened before the crash")

	// A fresh worker on the same durable consumer.
	q2 := newQueue(t, js, ledger, cfg)
	c2 := brokertest.NewClient(t, q2, ledger, rec)
	require.NoError(t, c2.Start(ctx))
	require.Eventually(t, func() bool { return settled(t, js, cfg) }, 15*time.Second, 20*time.Millisecond,
		"the redelivered message is acknowledged once the ledger says delivered")
	require.NoError(t, c2.Stop(ctx))

	reqs := rec.RequestsFor(id)
	assert.Len(t, reqs, 1, "the redelivered message did not reach the recipient")
	assert.Equal(t, 1, rec.Effects(id))
	as, err := ledger.Attempts(ctx, id)
	require.NoError(t, err)
	assert.Len(t, as, 1)
	assert.Zero(t, q2.InFlight())
}

func TestWorkerRetriesAndDeadLettersWithTheReasonInAHeader(t *testing.T) {
	ctx := context.Background()
	js := connect(t)
	cfg := testConfig(t, js)
	ledger := memory.NewStore()
	q := newQueue(t, js, ledger, cfg)
	c, rec, retried, dead := brokertest.RetryAndDeadLetter(t, q, ledger)
	require.Eventually(t, func() bool { return settled(t, js, cfg) }, 5*time.Second, 10*time.Millisecond)
	require.NoError(t, c.Stop(ctx))

	for _, r := range rec.RequestsFor(retried) {
		assert.Equal(t, retried, r.DeliveryID, "every attempt carried the same ID")
	}
	assert.Len(t, rec.RequestsFor(retried), 3)

	dlq, err := js.Stream(ctx, cfg.Stream+"_DEAD")
	require.NoError(t, err)
	msg, err := dlq.GetMsg(ctx, 1)
	require.NoError(t, err)
	assert.Equal(t, hookrelay.ReasonUnprocessable, msg.Header.Get(hooknats.HeaderDeadLetterReason))
	assert.Equal(t, dead, msg.Header.Get(hooknats.HeaderDeliveryID))
	got, err := hookrelay.UnmarshalEnvelope(msg.Data)
	require.NoError(t, err)
	assert.Equal(t, dead, got.ID, "the dead-letter message keeps the delivery ID")
	assert.False(t, bytes.Contains(msg.Data, []byte(brokertest.Secret)) || bytes.Contains(msg.Data, []byte("accounting.example")),
		"the broker never sees the destination's URL or secret")
	info, err := dlq.Info(ctx)
	require.NoError(t, err)
	assert.EqualValues(t, 1, info.State.Msgs, "only the dead delivery is on the dead-letter path")
}

func TestMessageFromANewerLibraryIsParkedNotDropped(t *testing.T) {
	ctx := context.Background()
	js := connect(t)
	cfg := testConfig(t, js)
	ledger := memory.NewStore()
	q := newQueue(t, js, ledger, cfg)
	_, err := js.Publish(ctx, cfg.Subject, []byte(`{"v":99,"id":"whd_future"}`))
	require.NoError(t, err)

	cs, err := q.Claim(ctx, hookrelay.ClaimParams{Now: time.Now(), Limit: 10, LeaseFor: time.Second})
	require.NoError(t, err)
	assert.Empty(t, cs)
	s, err := js.Stream(ctx, cfg.Stream)
	require.NoError(t, err)
	info, err := s.Info(ctx)
	require.NoError(t, err)
	assert.EqualValues(t, 1, info.State.Msgs, "left in the work stream for a newer worker")
	dlq, err := js.Stream(ctx, cfg.Stream+"_DEAD")
	require.NoError(t, err)
	dinfo, err := dlq.Info(ctx)
	require.NoError(t, err)
	assert.Zero(t, dinfo.State.Msgs, "not dead-lettered either")
	time.Sleep(3 * testDelay)
	cs, err = q.Claim(ctx, hookrelay.ClaimParams{Now: time.Now(), Limit: 10, LeaseFor: time.Second})
	require.NoError(t, err)
	assert.Empty(t, cs, "parked for ParkDelay, not offered again at once")
}

func TestUnreadableAndOrphanMessages(t *testing.T) {
	ctx := context.Background()
	js := connect(t)
	cfg := testConfig(t, js)
	ledger := memory.NewStore()
	q := newQueue(t, js, ledger, cfg)
	_, err := js.Publish(ctx, cfg.Subject, []byte(`not an envelope`))
	require.NoError(t, err)
	orphan, err := hookrelay.MarshalEnvelope(hookrelay.Delivery{ID: "whd_orphan", EventID: "evt", DestinationID: "dest_1", Attempt: 1})
	require.NoError(t, err)
	_, err = js.Publish(ctx, cfg.Subject, orphan)
	require.NoError(t, err)

	cs, err := q.Claim(ctx, hookrelay.ClaimParams{Now: time.Now(), Limit: 10, LeaseFor: time.Second})
	require.NoError(t, err)
	assert.Empty(t, cs)
	assert.Eventually(t, func() bool { return settled(t, js, cfg) }, 5*time.Second, 10*time.Millisecond,
		"a message with no ledger record (its create rolled back) is acknowledged")
	dlq, err := js.Stream(ctx, cfg.Stream+"_DEAD")
	require.NoError(t, err)
	msg, err := dlq.GetMsg(ctx, 1)
	require.NoError(t, err)
	assert.Equal(t, hookrelay.ReasonMalformedEnvelope, msg.Header.Get(hooknats.HeaderDeadLetterReason))
	assert.Equal(t, "not an envelope", string(msg.Data), "kept as it was, for an operator")
}

func TestNewIsIdempotentAndChecksLeaseAgainstAckWait(t *testing.T) {
	ctx := context.Background()
	js := connect(t)
	cfg := testConfig(t, js)
	cfg.AckWait = time.Minute
	ledger := memory.NewStore()
	newQueue(t, js, ledger, cfg)
	q := newQueue(t, js, ledger, cfg) // a second worker process starting up
	_, err := q.Claim(ctx, hookrelay.ClaimParams{Now: time.Now(), Limit: 1, LeaseFor: 2 * time.Minute})
	assert.ErrorIs(t, err, hookrelay.ErrInvalidConfig, "a lease outliving the ack wait would let the server hand the message to another worker")

	cfg.DeadLetterSubject = cfg.Subject
	_, err = hooknats.New(ctx, js, ledger, cfg)
	assert.ErrorIs(t, err, hookrelay.ErrInvalidConfig)
}

// A delivery whose envelope is over the server's max_payload (1 MiB by
// default: a payload of about 800 KiB, base64 in the envelope) fails its
// publish with an error naming it, and does not keep the others of the
// call from being published: the worker's recovery of unpublished records
// publishes them in batches, oldest first, and one record that can never
// be published would otherwise hold back those after it for good.
func TestOversizedEnvelopeDoesNotHoldBackTheOthers(t *testing.T) {
	ctx := context.Background()
	js := connect(t)
	cfg := testConfig(t, js)
	q := newQueue(t, js, memory.NewStore(), cfg)
	delivery := func(id string, payload []byte) hookrelay.Delivery {
		return hookrelay.Delivery{ID: id, EventID: "evt_" + id, DestinationID: "dest_1", Attempt: 1, Payload: payload, NextAttemptAt: time.Now()}
	}
	maxPayload := int(js.Conn().MaxPayload())
	err := q.Enqueue(ctx, []hookrelay.Delivery{
		delivery("whd_small_1", []byte(`{}`)),
		delivery("whd_big", bytes.Repeat([]byte("a"), maxPayload*4/5)),
		delivery("whd_small_2", []byte(`{}`)),
	})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "whd_big")
	assert.NotContains(t, err.Error(), "whd_small")
	s, err := js.Stream(ctx, cfg.Stream)
	require.NoError(t, err)
	info, err := s.Info(ctx)
	require.NoError(t, err)
	assert.EqualValues(t, 2, info.State.Msgs, "both small deliveries were published")
}

// Delivery IDs that differ only where a NATS header value loses its
// spelling (leading or trailing blanks, which the server trims; line
// breaks, which become spaces) are different deliveries: none of them is
// taken for a repeated publish of another and dropped.
func TestIDsDifferingOnlyInBlanksOrLineBreaksAreAllPublished(t *testing.T) {
	ctx := context.Background()
	js := connect(t)
	cfg := testConfig(t, js)
	q := newQueue(t, js, memory.NewStore(), cfg)
	ids := []string{"whd_1", " whd_1", "whd_1 ", "\twhd_1", "whd 1", "whd\n1", "whd\r1", "whd\r\n1", "whd  1"}
	enqueueIDs(t, q, ids)
	s, err := js.Stream(ctx, cfg.Stream)
	require.NoError(t, err)
	info, err := s.Info(ctx)
	require.NoError(t, err)
	assert.EqualValues(t, len(ids), info.State.Msgs, "one message per delivery")
}

// A Sender's reason can be any length; the ledger keeps it. On the
// dead-letter stream's header it is cut, so a long one does not make the
// dead-letter message too large to publish.
func TestALongReasonStillDeadLetters(t *testing.T) {
	ctx := context.Background()
	js := connect(t)
	cfg := testConfig(t, js)
	ledger := memory.NewStore()
	q := newQueue(t, js, ledger, cfg)
	cs := []hookrelay.Claim{brokertest.ClaimOne(t, q, ledger, "whd_long_reason")}
	reason := strings.Repeat("r", int(js.Conn().MaxPayload())+1)
	require.NoError(t, q.DeadLetter(ctx, hookrelay.DeadLetterParams{Delivery: cs[0].Delivery, Lease: cs[0].Lease, Reason: reason, Now: time.Now()}))
	dlq, err := js.Stream(ctx, cfg.Stream+"_DEAD")
	require.NoError(t, err)
	msg, err := dlq.GetMsg(ctx, 1)
	require.NoError(t, err)
	got := msg.Header.Get(hooknats.HeaderDeadLetterReason)
	assert.True(t, strings.HasPrefix(got, "rrrr"), "the reason's start is kept")
	assert.LessOrEqual(t, len(got), 256+len("…"), "cut")
}

// A payload whose envelope is over the server's max_payload (less room
// for the headers) is refused at enqueue, naming Payload, before anything
// is stored; one a little under is stored and claimed.
func TestAPayloadTheServerCannotCarryIsRefusedBeforeItIsStored(t *testing.T) {
	js := connect(t)
	cfg := testConfig(t, js)
	ledger := memory.NewStore()
	q := newQueue(t, js, ledger, cfg)
	require.Less(t, q.MaxEnvelopeBytes(), int(js.Conn().MaxPayload()))
	brokertest.OversizedPayload(t, q, ledger)
}

// The delivery ID header reads back as the delivery's ID, whatever the ID
// holds: the server trims the blanks around a header value and turns line
// breaks into spaces, so the header carries the ID query-escaped, and
// url.QueryUnescape of it is the ID, on the work stream and the
// dead-letter stream alike. A plain generated ID is its own escape.
func TestTheDeliveryIDHeaderReadsBackAsTheID(t *testing.T) {
	ctx := context.Background()
	js := connect(t)
	cfg := testConfig(t, js)
	ledger := memory.NewStore()
	q := newQueue(t, js, ledger, cfg)
	ids := []string{"whd_01J9ZK3V4R", " whd_1", "whd_1 ", "\twhd_1\t", "whd 1", "whd\n1", "whd\r\n1", "whd+1", "whd%201", "ünï/cødé:1"}
	enqueueIDs(t, q, ids)
	s, err := js.Stream(ctx, cfg.Stream)
	require.NoError(t, err)
	for i, id := range ids {
		msg, err := s.GetMsg(ctx, uint64(i+1))
		require.NoError(t, err)
		env, err := hookrelay.UnmarshalEnvelope(msg.Data)
		require.NoError(t, err)
		require.Equal(t, id, env.ID)
		got, err := url.QueryUnescape(msg.Header.Get(hooknats.HeaderDeliveryID))
		require.NoError(t, err, "%q", id)
		assert.Equal(t, id, got, "the header names the delivery exactly")
	}
	assert.Equal(t, ids[0], func() string {
		msg, err := s.GetMsg(ctx, 1)
		require.NoError(t, err)
		return msg.Header.Get(hooknats.HeaderDeliveryID)
	}(), "a generated ID reads as itself")

	// The dead-letter path, on streams of its own (the messages above have
	// no ledger record).
	cfg = testConfig(t, js)
	q = newQueue(t, js, ledger, cfg)
	dead := brokertest.ClaimOne(t, q, ledger, " whd_dead ")
	require.NoError(t, q.DeadLetter(ctx, hookrelay.DeadLetterParams{Delivery: dead.Delivery, Lease: dead.Lease, Reason: "r", Now: time.Now()}))
	dlq, err := js.Stream(ctx, cfg.Stream+"_DEAD")
	require.NoError(t, err)
	msg, err := dlq.GetMsg(ctx, 1)
	require.NoError(t, err)
	got, err := url.QueryUnescape(msg.Header.Get(hooknats.HeaderDeliveryID))
	require.NoError(t, err)
	assert.Equal(t, " whd_dead ", got)
}

// enqueueIDs enqueues one due delivery to dest_1 for each ID, in order.
func enqueueIDs(t *testing.T, q *hooknats.Queue, ids []string) {
	t.Helper()
	at := time.Now()
	var ds []hookrelay.Delivery
	for _, id := range ids {
		ds = append(ds, hookrelay.Delivery{ID: id, EventID: "evt", DestinationID: "dest_1", Attempt: 1, NextAttemptAt: at})
	}
	require.NoError(t, q.Enqueue(context.Background(), ds))
}

// TestADeletedConsumerIsCreatedAgain: an operator who deletes the durable
// consumer, or the stream (to empty it), left every worker claiming
// nothing, with no error (a fetch from a deleted consumer just times out
// empty), until it was restarted. An empty claim now asks whether the
// consumer exists and creates the topology again, as New does.
func TestADeletedConsumerIsCreatedAgain(t *testing.T) {
	for name, remove := range map[string]func(context.Context, jetstream.JetStream, hooknats.Config) error{
		"consumer": func(ctx context.Context, js jetstream.JetStream, cfg hooknats.Config) error {
			return js.DeleteConsumer(ctx, cfg.Stream, "hookrelay-worker")
		},
		"stream": func(ctx context.Context, js jetstream.JetStream, cfg hooknats.Config) error {
			return js.DeleteStream(ctx, cfg.Stream)
		},
	} {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			js := connect(t)
			cfg := testConfig(t, js)
			ledger := memory.NewStore()
			q := newQueue(t, js, ledger, cfg)
			require.NoError(t, remove(ctx, js, cfg))
			claim := func() ([]hookrelay.Claim, error) {
				return q.Claim(ctx, hookrelay.ClaimParams{Now: time.Now(), Limit: 1, LeaseFor: time.Minute, Holder: "w"})
			}
			_, err := claim() // finds the consumer gone
			require.NoError(t, err)

			c := brokertest.NewClient(t, q, ledger, &hookrelaytest.Recipient{})
			id := brokertest.Enqueue(t, c, "evt_after_delete")
			claimed, last := claimsWithin(5*time.Second, claim, id)
			assert.True(t, claimed, "claimed after the %s was deleted; last claim error: %v", name, last)
		})
	}
}

// deletedConsumer answers every fetch as a newer server answers one from
// a consumer that was deleted: no message, and ErrConsumerDeleted as the
// batch's error.
type deletedConsumer struct{ jetstream.Consumer }

func (deletedConsumer) FetchNoWait(int) (jetstream.MessageBatch, error) { return deletedBatch{}, nil }

type deletedBatch struct{}

func (deletedBatch) Messages() <-chan jetstream.Msg {
	c := make(chan jetstream.Msg)
	close(c)
	return c
}

func (deletedBatch) Error() error { return jetstream.ErrConsumerDeleted }

// TestAConsumerTheServerReportsDeletedIsCreatedAgain: newer servers
// answer a fetch from a deleted consumer with "consumer deleted" rather
// than an empty batch. That error was returned as it was, without
// creating the consumer again, so every claim failed until the worker
// was restarted.
func TestAConsumerTheServerReportsDeletedIsCreatedAgain(t *testing.T) {
	ctx := context.Background()
	js := connect(t)
	cfg := testConfig(t, js)
	ledger := memory.NewStore()
	q := newQueue(t, js, ledger, cfg)
	require.NoError(t, js.DeleteConsumer(ctx, cfg.Stream, "hookrelay-worker"))
	q.WrapConsumer(func(c jetstream.Consumer) jetstream.Consumer { return deletedConsumer{c} })

	c := brokertest.NewClient(t, q, ledger, &hookrelaytest.Recipient{})
	id := brokertest.Enqueue(t, c, "evt_after_delete")
	claimed, last := claimsWithin(5*time.Second, func() ([]hookrelay.Claim, error) {
		return q.Claim(ctx, hookrelay.ClaimParams{Now: time.Now(), Limit: 1, LeaseFor: time.Minute, Holder: "w"})
	}, id)
	assert.True(t, claimed, "claimed after the server reported the consumer deleted; last claim error: %v", last)
}

// TestAStreamDeletedJustAfterACheckIsCreatedByTheNextEnqueue: a claim
// that finds nothing asks whether the consumer exists at most every 2 s.
// A stream deleted within that time after a claim made the next enqueue
// fail ("no response from stream"), and its delivery waited for the
// worker's recovery of unpublished records (5 minutes by default). The
// enqueue now creates the streams and the consumer again and publishes
// once more: the delivery is claimed at once.
func TestAStreamDeletedJustAfterACheckIsCreatedByTheNextEnqueue(t *testing.T) {
	ctx := context.Background()
	js := connect(t)
	cfg := testConfig(t, js)
	ledger := memory.NewStore()
	q := newQueue(t, js, ledger, cfg)
	claim := func() ([]hookrelay.Claim, error) {
		return q.Claim(ctx, hookrelay.ClaimParams{Now: time.Now(), Limit: 1, LeaseFor: time.Minute, Holder: "w"})
	}
	_, err := claim() // an empty claim: the queue checked the consumer just now
	require.NoError(t, err)
	require.NoError(t, js.DeleteStream(ctx, cfg.Stream))

	c := brokertest.NewClient(t, q, ledger, &hookrelaytest.Recipient{})
	id := brokertest.Enqueue(t, c, "evt_after_delete")
	cs, err := claim()
	require.NoError(t, err)
	require.Len(t, cs, 1, "claimed at once")
	assert.Equal(t, id, cs[0].Delivery.ID)
}

// TestADeletedDeadLetterStreamIsCreatedByTheNextDeadLetter: with the
// dead-letter stream deleted, dead-lettering failed ("no response from
// stream") and handed the message back, every time, until the worker
// restarted: nothing checks that stream otherwise.
func TestADeletedDeadLetterStreamIsCreatedByTheNextDeadLetter(t *testing.T) {
	ctx := context.Background()
	js := connect(t)
	cfg := testConfig(t, js)
	ledger := memory.NewStore()
	q := newQueue(t, js, ledger, cfg)
	claim := brokertest.ClaimOne(t, q, ledger, "whd_dead")
	require.NoError(t, js.DeleteStream(ctx, cfg.Stream+"_DEAD"))
	require.NoError(t, q.DeadLetter(ctx, hookrelay.DeadLetterParams{Delivery: claim.Delivery, Lease: claim.Lease, Reason: "r", Now: time.Now()}))
	dlq, err := js.Stream(ctx, cfg.Stream+"_DEAD")
	require.NoError(t, err)
	msg, err := dlq.GetMsg(ctx, 1)
	require.NoError(t, err)
	assert.Equal(t, "whd_dead", msg.Header.Get(hooknats.HeaderDeliveryID))
}

// claimsWithin calls claim every 20 ms until it returns delivery id alone
// or within has passed; it says whether it did, and the last claim's
// error.
func claimsWithin(within time.Duration, claim func() ([]hookrelay.Claim, error), id string) (bool, error) {
	var last error
	for deadline := time.Now().Add(within); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		var cs []hookrelay.Claim
		cs, last = claim()
		if last == nil && len(cs) == 1 && cs[0].Delivery.ID == id {
			return true, nil
		}
	}
	return false, last
}
