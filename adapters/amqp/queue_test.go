package hookamqp_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hookrelay/hookrelay"
	hookamqp "github.com/hookrelay/hookrelay/adapters/amqp"
	"github.com/hookrelay/hookrelay/adapters/memory"
	"github.com/hookrelay/hookrelay/hookrelaytest"
	"github.com/hookrelay/hookrelay/internal/brokertest"
)

// depth returns the ready messages of each queue of cfg. Call it after
// the queue closed, so nothing is held unacknowledged.
func depth(t *testing.T, cfg hookamqp.Config) map[string]int {
	t.Helper()
	conn, err := amqp.Dial(brokerURL(t))
	require.NoError(t, err)
	defer conn.Close()
	out := map[string]int{}
	names := []string{cfg.Name + ".work", cfg.Name + ".dead"}
	for _, d := range testBuckets {
		names = append(names, fmt.Sprintf("%s.wait.%dms", cfg.Name, d.Milliseconds()))
	}
	for _, n := range names {
		ch, err := conn.Channel()
		require.NoError(t, err)
		q, err := ch.QueueDeclarePassive(n, true, false, false, false, nil)
		require.NoError(t, err, n)
		out[n] = q.Messages
		_ = ch.Close()
	}
	return out
}

func total(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

// getDead takes one message from the dead-letter queue.
func getDead(t *testing.T, cfg hookamqp.Config) amqp.Delivery {
	t.Helper()
	conn, err := amqp.Dial(brokerURL(t))
	require.NoError(t, err)
	defer conn.Close()
	ch, err := conn.Channel()
	require.NoError(t, err)
	m, ok, err := ch.Get(cfg.Name+".dead", true)
	require.NoError(t, err)
	require.True(t, ok, "a message on the dead-letter queue")
	return m
}

type crashingQueue struct{ hookrelay.Queue }

var errCrash = errors.New("worker killed before the acknowledgement")

func (crashingQueue) Acknowledge(context.Context, hookrelay.AckParams) error { return errCrash }

func TestCrashBetweenLedgerWriteAndAckIsAbsorbedByTheLedger(t *testing.T) {
	ctx := context.Background()
	cfg := testConfig(t)
	ledger := memory.NewStore()
	rec := &hookrelaytest.Recipient{}

	q1, err := hookamqp.New(ctx, brokerURL(t), ledger, cfg)
	require.NoError(t, err)
	c1 := brokertest.NewClient(t, crashingQueue{q1}, ledger, rec)
	id := brokertest.Enqueue(t, c1, "evt_crash")
	cs, err := q1.Claim(ctx, hookrelay.ClaimParams{Now: time.Now(), Limit: 1, LeaseFor: time.Second, Holder: "doomed"})
	require.NoError(t, err)
	require.Len(t, cs, 1)
	require.ErrorIs(t, c1.Process(ctx, cs[0]), errCrash)
	require.NoError(t, q1.Close()) // killed: the broker puts the message back
	d, err := ledger.Get(ctx, id)
	require.NoError(t, err)
	require.Equal(t, hookrelay.StateDelivered, d.State, "the ledger write happened before the crash")

	logs := &logBuffer{}
	cfg.Logger = slog.New(slog.NewTextHandler(logs, nil))
	q2 := newQueue(t, ledger, cfg)
	c2 := brokertest.NewClient(t, q2, ledger, rec)
	require.NoError(t, c2.Start(ctx))
	require.Eventually(t, func() bool { return logs.Contains(id) }, 10*time.Second, 10*time.Millisecond,
		"the fresh worker receives the message, finds it delivered and acknowledges it")
	require.NoError(t, c2.Stop(ctx))
	require.NoError(t, q2.Close())
	assert.Zero(t, total(depth(t, cfg)), "nothing left on any queue, nothing put back at close")
	assert.Len(t, rec.RequestsFor(id), 1, "the redelivered message did not reach the recipient")
	assert.Equal(t, 1, rec.Effects(id))
}

// logBuffer collects a queue's log records.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *logBuffer) Contains(s string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Contains(l.buf.String(), s)
}

// dropConnections closes the queue's connection from the broker's side
// when rabbitmqctl is at hand (as an operator or a network failure would),
// else from the client's side. Only that connection: the broker is shared
// with the other tests running at the same time (here and in other
// packages or checkouts), and closing theirs failed them.
func dropConnections(t *testing.T, q *hookamqp.Queue) {
	t.Helper()
	if path, err := exec.LookPath("rabbitmqctl"); err == nil {
		err := closeOnBroker(path, q.LocalAddr())
		if err == nil {
			return
		}
		t.Logf("rabbitmqctl: %v; closing from the client side", err)
	}
	q.DropConnection()
}

// closeOnBroker closes the connection whose client side is local.
func closeOnBroker(rabbitmqctl, local string) error {
	out, err := exec.Command(rabbitmqctl, "list_connections", "pid", "name", "--silent").CombinedOutput()
	if err != nil {
		return fmt.Errorf("list_connections: %v: %s", err, out)
	}
	for _, line := range strings.Split(string(out), "\n") {
		pid, name, ok := strings.Cut(strings.TrimSpace(line), "\t")
		if ok && strings.HasPrefix(name, local+" -> ") {
			out, err := exec.Command(rabbitmqctl, "close_connection", pid, "hookrelay test: connection dropped").CombinedOutput()
			if err != nil {
				return fmt.Errorf("close_connection: %v: %s", err, out)
			}
			return nil
		}
	}
	return fmt.Errorf("no connection from %s in list_connections: %s", local, out)
}

func TestConnectionDropMidRunLosesNothingAndAcknowledgesNothingTwice(t *testing.T) {
	ctx := context.Background()
	cfg := testConfig(t)
	ledger := memory.NewStore()
	q := newQueue(t, ledger, cfg)
	gate := make(chan struct{})
	var started atomic.Int32
	rec := &hookrelaytest.Recipient{Script: func(hookrelay.Delivery, int) hookrelaytest.RecipientAnswer {
		a := hookrelaytest.Accept()
		if started.Add(1) <= 4 {
			a.Block = gate // the first four sends are in flight when the connection drops
		}
		return a
	}}
	var workerErrors atomic.Int32
	c := brokertest.NewClient(t, q, ledger, rec, func(c *hookrelay.Config) {
		c.Concurrency, c.PerDestinationConcurrency, c.LeaseFor = 4, 4, 5*time.Second
		c.Observer = hookrelay.ObserverFunc(func(_ context.Context, e hookrelay.Event) {
			if e.Name == hookrelay.EventWorkerError {
				workerErrors.Add(1)
			}
		})
	})
	var ids []string
	for i := range 20 {
		ids = append(ids, brokertest.Enqueue(t, c, fmt.Sprintf("evt_%02d", i)))
	}
	require.NoError(t, c.Start(ctx))
	require.Eventually(t, func() bool { return started.Load() >= 4 }, 10*time.Second, 5*time.Millisecond)

	dropConnections(t, q)
	require.Eventually(t, func() bool { return q.Generation() >= 2 }, 15*time.Second, 10*time.Millisecond, "the queue reconnected")
	close(gate) // the in-flight sends finish; their acks cannot reach the dead channel

	require.Eventually(t, func() bool {
		for _, id := range ids {
			if d, err := ledger.Get(ctx, id); err != nil || d.State != hookrelay.StateDelivered {
				return false
			}
		}
		return true
	}, 20*time.Second, 10*time.Millisecond, "every delivery completed after the reconnect")
	// The four requeued messages come back and are acknowledged as
	// finished; then nothing is left.
	require.Eventually(t, func() bool {
		return q.InFlight() == 0 && total(depth(t, cfg)) == 0
	}, 10*time.Second, 20*time.Millisecond)
	require.NoError(t, c.Stop(ctx))
	require.NoError(t, q.Close())
	assert.Zero(t, total(depth(t, cfg)), "no message lost in the broker or put back at close")
	assert.EqualValues(t, 2, q.Generation(), "one reconnect: no acknowledgement of a stale delivery tag closed the new channel")
	// The four stale acknowledgements either fail (reported as worker
	// errors) or, when a claim forgot the closed channel's handles first,
	// find the ledger already delivered and are no-ops: which one depends
	// on timing, and both are right. What must hold is checked below.
	t.Logf("worker errors reported: %d", workerErrors.Load())
	for _, id := range ids {
		assert.Len(t, rec.RequestsFor(id), 1, "delivery %s sent once", id)
		assert.Equal(t, 1, rec.Effects(id))
	}
}

func TestWorkerRetriesAndDeadLettersWithTheReasonInAHeader(t *testing.T) {
	ctx := context.Background()
	cfg := testConfig(t)
	ledger := memory.NewStore()
	q := newQueue(t, ledger, cfg)
	c, rec, retried, dead := brokertest.RetryAndDeadLetter(t, q, ledger)
	require.NoError(t, c.Stop(ctx))
	require.NoError(t, q.Close())

	assert.Len(t, rec.RequestsFor(retried), 3, "three attempts, one delivery ID")
	got := depth(t, cfg)
	assert.Equal(t, 1, got[cfg.Name+".dead"], "only the dead delivery is on the dead-letter queue")
	assert.Equal(t, 1, total(got), "and nothing else is left")
	msg := getDead(t, cfg)
	assert.Equal(t, hookrelay.ReasonUnprocessable, msg.Headers[hookamqp.HeaderDeadLetterReason])
	assert.Equal(t, dead, msg.Headers[hookamqp.HeaderDeliveryID])
	env, err := hookrelay.UnmarshalEnvelope(msg.Body)
	require.NoError(t, err)
	assert.Equal(t, dead, env.ID, "the dead-letter message keeps the delivery ID")
	assert.False(t, bytes.Contains(msg.Body, []byte(brokertest.Secret)) || bytes.Contains(msg.Body, []byte("accounting.example")),
		"the broker never sees the destination's URL or secret")
}

func publishRaw(t *testing.T, cfg hookamqp.Config, body []byte) {
	t.Helper()
	conn, err := amqp.Dial(brokerURL(t))
	require.NoError(t, err)
	defer conn.Close()
	ch, err := conn.Channel()
	require.NoError(t, err)
	require.NoError(t, ch.Confirm(false))
	dc, err := ch.PublishWithDeferredConfirmWithContext(context.Background(), "", cfg.Name+".work", false, false, amqp.Publishing{Body: body})
	require.NoError(t, err)
	require.True(t, dc.Wait())
}

func TestMessageFromANewerLibraryIsParkedNotDropped(t *testing.T) {
	ctx := context.Background()
	cfg := testConfig(t)
	ledger := memory.NewStore()
	q := newQueue(t, ledger, cfg)
	publishRaw(t, cfg, []byte(`{"v":99,"id":"whd_future"}`))
	cs, err := q.Claim(ctx, hookrelay.ClaimParams{Now: time.Now(), Limit: 10, LeaseFor: time.Second})
	require.NoError(t, err)
	assert.Empty(t, cs)
	require.NoError(t, q.Close())
	// With no consumer left, it settles in the work queue once its wait
	// expires.
	assert.Eventually(t, func() bool { return depth(t, cfg)[cfg.Name+".work"] == 1 }, 5*time.Second, 10*time.Millisecond,
		"kept on the broker for a newer worker")
	got := depth(t, cfg)
	assert.Equal(t, 1, total(got))
	assert.Zero(t, got[cfg.Name+".dead"], "not dead-lettered")
}

func TestUnreadableAndOrphanMessages(t *testing.T) {
	ctx := context.Background()
	cfg := testConfig(t)
	ledger := memory.NewStore()
	q := newQueue(t, ledger, cfg)
	publishRaw(t, cfg, []byte(`not an envelope`))
	orphan, err := hookrelay.MarshalEnvelope(hookrelay.Delivery{ID: "whd_orphan", EventID: "evt", DestinationID: "dest_1", Attempt: 1})
	require.NoError(t, err)
	publishRaw(t, cfg, orphan)
	cs, err := q.Claim(ctx, hookrelay.ClaimParams{Now: time.Now(), Limit: 2, LeaseFor: time.Second})
	require.NoError(t, err)
	assert.Empty(t, cs)
	require.NoError(t, q.Close())
	got := depth(t, cfg)
	assert.Equal(t, map[string]int{cfg.Name + ".dead": 1}, nonZero(got),
		"the orphan (its create rolled back) is acknowledged; the unreadable one is dead-lettered")
	msg := getDead(t, cfg)
	assert.Equal(t, hookrelay.ReasonMalformedEnvelope, msg.Headers[hookamqp.HeaderDeadLetterReason])
	assert.Equal(t, "not an envelope", string(msg.Body), "kept as it was, for an operator")
}

func nonZero(m map[string]int) map[string]int {
	out := map[string]int{}
	for k, v := range m {
		if v != 0 {
			out[k] = v
		}
	}
	return out
}

func TestConfigIsValidatedAndDeclarationIdempotent(t *testing.T) {
	ctx := context.Background()
	cfg := testConfig(t)
	ledger := memory.NewStore()
	newQueue(t, ledger, cfg)
	newQueue(t, ledger, cfg) // a second worker process starting up
	bad := cfg
	bad.DelayBuckets = []time.Duration{time.Microsecond}
	_, err := hookamqp.New(ctx, brokerURL(t), ledger, bad)
	assert.ErrorIs(t, err, hookrelay.ErrInvalidConfig)
	_, err = hookamqp.New(ctx, "amqp://guest:guest@127.0.0.1:1/", ledger, cfg)
	assert.ErrorIs(t, err, hookamqp.ErrNotConnected)
	assert.NotContains(t, err.Error(), "guest:guest", "no credentials in errors")
}

// A worker claims ahead: it asks for more than the prefetch window lets
// through while it holds claims. Such a claim returns with what the window
// holds instead of waiting its whole ClaimWait for messages the broker
// will not push until some are settled, and a settled message makes room
// for the next.
func TestClaimBeyondThePrefetchWindowDoesNotWaitForIt(t *testing.T) {
	ctx := context.Background()
	cfg := testConfig(t)
	cfg.Prefetch = 2
	cfg.ClaimWait = time.Hour // a claim that waited for the window would hang
	ledger := memory.NewStore()
	q := newQueue(t, ledger, cfg)
	c := brokertest.NewClient(t, q, ledger, &hookrelaytest.Recipient{})
	for i := range 4 {
		brokertest.Enqueue(t, c, fmt.Sprintf("evt_%d", i))
	}
	claim := func(limit int) []hookrelay.Claim {
		t.Helper()
		type answer struct {
			cs  []hookrelay.Claim
			err error
		}
		done := make(chan answer, 1)
		go func() {
			cs, err := q.Claim(ctx, hookrelay.ClaimParams{Now: c.Clock().Now(), Limit: limit, LeaseFor: time.Minute, Holder: "w"})
			done <- answer{cs, err}
		}()
		select {
		case a := <-done:
			require.NoError(t, a.err)
			return a.cs
		case <-time.After(20 * time.Second): // a hang, not a speed check
			t.Fatal("the claim waited for messages the prefetch window holds back")
			return nil
		}
	}
	first := claim(10)
	require.Len(t, first, 2, "the window lets two through")
	assert.Empty(t, claim(10), "both are held: nothing can come")
	require.NoError(t, q.Acknowledge(ctx, hookrelay.AckParams{ID: first[0].Delivery.ID, Lease: first[0].Lease, Now: c.Clock().Now()}))
	assert.Len(t, claim(10), 1, "an acknowledgement makes room for one")
	require.NoError(t, q.Release(ctx, hookrelay.ReleaseParams{ID: first[1].Delivery.ID, Lease: first[1].Lease, At: c.Clock().Now(), Now: c.Clock().Now()}))
	assert.Len(t, claim(10), 1, "so does a message given back")
}

// With Prefetch left at zero, the window lets through what a worker with
// the default Concurrency claims ahead: eight rounds of its slots, not
// four. Claims taken and not settled fill the window, and then nothing
// more comes.
func TestDefaultPrefetchHoldsEightRoundsOfTheDefaultConcurrency(t *testing.T) {
	ctx := context.Background()
	cfg := testConfig(t)
	cfg.Prefetch = 0
	want := 8 * hookrelay.DefaultConcurrency
	ledger := memory.NewStore()
	q := newQueue(t, ledger, cfg)
	c := brokertest.NewClient(t, q, ledger, &hookrelaytest.Recipient{})
	for i := range want + 2 {
		brokertest.Enqueue(t, c, fmt.Sprintf("evt_%d", i))
	}
	held := 0
	deadline := time.Now().Add(20 * time.Second) // messages still on their way, not a speed check
	for held < want+2 && time.Now().Before(deadline) {
		cs, err := q.Claim(ctx, hookrelay.ClaimParams{Now: c.Clock().Now(), Limit: 2 * want, LeaseFor: time.Minute, Holder: "w"})
		require.NoError(t, err)
		held += len(cs)
		if len(cs) == 0 && held >= want {
			break // the window is full: nothing can come until one is settled
		}
	}
	assert.Equal(t, want, held, "claims held unsettled with the default Prefetch")
}

// A broker URL that does not parse is refused as invalid config, and the
// error names the problem without the password, whatever the password
// holds: the URL parser quotes the whole URL, and a reserved character in
// the password makes it quote a piece of it ("invalid port \":pa\"").
func TestAnInvalidURLIsRefusedWithoutItsPassword(t *testing.T) {
	ctx := context.Background()
	cfg := testConfig(t)
	for _, tc := range []struct{ url, password string }{
		{"amqp://guest:s3cr3t-pw@127.0.0.1:5672/%zz", "s3cr3t-pw"},
		{"amqp://guest:s3cr3t-pw@[::1/", "s3cr3t-pw"},
		{"amqp://guest:s3cr/3t-pw@127.0.0.1:5672/", "s3cr/3t-pw"},
		{"amqp://guest:s3cr%zz3t@127.0.0.1:5672/", "s3cr%zz3t"},
		{"amqp://guest:s3\"cr3t\x01@127.0.0.1:5672/%zz", "cr3t"},
	} {
		_, err := hookamqp.New(ctx, tc.url, memory.NewStore(), cfg)
		require.Error(t, err, tc.url)
		assert.ErrorIs(t, err, hookrelay.ErrInvalidConfig, tc.url)
		for i := 0; i+3 <= len(tc.password); i++ {
			assert.NotContains(t, err.Error(), tc.password[i:i+3], "%s: no piece of the password in %q", tc.url, err)
		}
		assert.Contains(t, err.Error(), "URL", tc.url)
	}
}

// AMQP carries the prefetch count in 16 bits: a larger Prefetch is refused
// naming the limit, not wrapped around (65536 became 0, no limit at all,
// and 70000 became 4464); the largest that fits is accepted.
func TestPrefetchOverTheProtocolLimitIsRefused(t *testing.T) {
	ctx := context.Background()
	cfg := testConfig(t)
	cfg.Prefetch = 65536
	q, err := hookamqp.New(ctx, brokerURL(t), memory.NewStore(), cfg)
	if err == nil {
		require.NoError(t, q.Close())
	}
	require.ErrorIs(t, err, hookrelay.ErrInvalidConfig)
	assert.Contains(t, err.Error(), "Prefetch")
	assert.Contains(t, err.Error(), "65535")

	cfg.Prefetch = 65535
	newQueue(t, memory.NewStore(), cfg)
}

// A Sender's reason can be any length; the ledger keeps it. On the
// dead-letter queue's header it is cut, so a long one does not make the
// broker refuse the dead-letter message (a header over the frame size).
func TestALongReasonStillDeadLetters(t *testing.T) {
	ctx := context.Background()
	cfg := testConfig(t)
	ledger := memory.NewStore()
	q := newQueue(t, ledger, cfg)
	cs := []hookrelay.Claim{brokertest.ClaimOne(t, q, ledger, "whd_long_reason")}
	reason := strings.Repeat("r", 1<<21)
	require.NoError(t, q.DeadLetter(ctx, hookrelay.DeadLetterParams{Delivery: cs[0].Delivery, Lease: cs[0].Lease, Reason: reason, Now: time.Now()}))
	require.NoError(t, q.Close())
	got, ok := getDead(t, cfg).Headers[hookamqp.HeaderDeadLetterReason].(string)
	require.True(t, ok)
	assert.True(t, strings.HasPrefix(got, "rrrr"), "the reason's start is kept")
	assert.LessOrEqual(t, len(got), 256+len("…"), "cut")
}

// releaseDespiteCancel is a ledger whose ReleaseLease finishes even when
// its caller gave up, so the broker step after it is what fails.
type releaseDespiteCancel struct{ *memory.Store }

func (l releaseDespiteCancel) ReleaseLease(_ context.Context, p hookrelay.ReleaseLeaseParams) error {
	return l.Store.ReleaseLease(context.Background(), p)
}

// A dead-letter whose publish fails (here the caller gave up) hands the
// message back: it was neither acknowledged nor returned, so the broker
// kept it out of reach on the consumer channel, and its prefetch slot,
// until the connection closed.
func TestAFailedDeadLetterHandsTheMessageBack(t *testing.T) {
	ctx := context.Background()
	cfg := testConfig(t)
	ledger := memory.NewStore()
	q := newQueue(t, releaseDespiteCancel{ledger}, cfg)
	cs := []hookrelay.Claim{brokertest.ClaimOne(t, q, ledger, "whd_dl_fails")}
	gone, cancel := context.WithCancel(ctx)
	cancel()
	err := q.DeadLetter(gone, hookrelay.DeadLetterParams{Delivery: cs[0].Delivery, Lease: cs[0].Lease, Reason: hookrelay.ReasonBadRequest, Now: time.Now()})
	require.ErrorContains(t, err, "context canceled")

	assert.Eventually(t, func() bool {
		cs, err := q.Claim(ctx, hookrelay.ClaimParams{Now: time.Now(), Limit: 1, LeaseFor: time.Minute, Holder: "w"})
		return err == nil && len(cs) == 1
	}, 5*time.Second, 10*time.Millisecond, "the message is back for the ledger to decide")
}

// RabbitMQ refuses a message over its max_message_size (closing the
// channel), so the queue's MessageLimit is Config.MaxMessageBytes: a
// payload whose envelope is over it is refused at enqueue, naming Payload,
// before anything is stored; one a little under is stored and claimed. The
// default is RabbitMQ 4's own, 16 MiB.
func TestAPayloadOverMaxMessageBytesIsRefusedBeforeItIsStored(t *testing.T) {
	cfg := testConfig(t)
	assert.Equal(t, 16<<20, newQueue(t, memory.NewStore(), cfg).MaxEnvelopeBytes(), "the default")

	cfg = testConfig(t)
	cfg.MaxMessageBytes = 256 << 10
	ledger := memory.NewStore()
	q := newQueue(t, ledger, cfg)
	assert.Equal(t, 256<<10, q.MaxEnvelopeBytes())
	brokertest.OversizedPayload(t, q, ledger)

	bad := testConfig(t)
	bad.MaxMessageBytes = -1
	_, err := hookamqp.New(context.Background(), brokerURL(t), ledger, bad)
	assert.ErrorIs(t, err, hookrelay.ErrInvalidConfig)
	assert.ErrorContains(t, err, "MaxMessageBytes")
}

// TestDroppingOneQueuesConnectionLeavesTheOthersAlone: the connection-drop
// tests share the broker with every other test of the machine (the
// conformance suite's queues, other packages, other checkouts running at
// the same time). Dropping one queue's connection must not close theirs:
// closing every connection on the broker made unrelated runs fail with
// ErrNotConnected while their queues reconnected.
func TestDroppingOneQueuesConnectionLeavesTheOthersAlone(t *testing.T) {
	bystander, err := amqp.Dial(brokerURL(t))
	require.NoError(t, err)
	defer bystander.Close()
	q := newQueue(t, memory.NewStore(), testConfig(t))

	dropConnections(t, q)
	require.Eventually(t, func() bool { return q.Generation() >= 2 }, 15*time.Second, 10*time.Millisecond, "the queue reconnected")
	time.Sleep(100 * time.Millisecond) // a close from the broker's side arrives at its own pace
	assert.False(t, bystander.IsClosed(), "another connection on the broker was left open")
}

// enqueuedAndClaimed enqueues one delivery through q and reports whether a
// claim receives it within a few seconds.
func enqueuedAndClaimed(t *testing.T, q *hookamqp.Queue, ledger *memory.Store, eventID string) bool {
	t.Helper()
	ctx := context.Background()
	c := brokertest.NewClient(t, q, ledger, &hookrelaytest.Recipient{})
	id := brokertest.Enqueue(t, c, eventID)
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		cs, err := q.Claim(ctx, hookrelay.ClaimParams{Now: time.Now(), Limit: 1, LeaseFor: time.Minute, Holder: "w"})
		if err == nil && len(cs) == 1 {
			return cs[0].Delivery.ID == id
		}
		time.Sleep(20 * time.Millisecond)
	}
	return false
}

// TestTheContextGivenToNewBoundsOnlyNew: a context that ends after New
// returned (a setup function's timeout, a request's context) cancelled the
// consumer with it, and the queue never received a message again.
func TestTheContextGivenToNewBoundsOnlyNew(t *testing.T) {
	ledger := memory.NewStore()
	cfg := testConfig(t)
	ctx, cancel := context.WithCancel(context.Background())
	q, err := hookamqp.New(ctx, brokerURL(t), ledger, cfg)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, q.Close()) })
	cancel()
	time.Sleep(100 * time.Millisecond) // the client cancels a consumer whose context ended at its own pace
	assert.True(t, enqueuedAndClaimed(t, q, ledger, "evt_after_setup"), "messages are consumed after New's context ended")
}

// TestAConsumerCancelledByTheBrokerIsStartedAgain: the broker cancels a
// consumer without closing its channel (its queue was deleted, or a
// node holding it went away). The queue reconnects at once, which
// declares the queues again and consumes, with no claim to notice it:
// until then the work queue does not exist, and the broker confirms an
// enqueue's publish to it and drops the message (unroutable), so a
// worker that was busy, or idle between polls, lost what was enqueued
// meanwhile.
func TestAConsumerCancelledByTheBrokerIsStartedAgain(t *testing.T) {
	ledger := memory.NewStore()
	cfg := testConfig(t)
	q := newQueue(t, ledger, cfg)
	conn := deleteQueue(t, cfg.Name+".work")
	// No claim: the queue notices the cancelled consumer by itself.
	require.Eventually(t, func() bool {
		ch, err := conn.Channel() // a passive declare of a missing queue closes its channel
		if err != nil {
			return false
		}
		defer ch.Close()
		_, err = ch.QueueDeclarePassive(cfg.Name+".work", true, false, false, false, nil)
		return err == nil
	}, 10*time.Second, 20*time.Millisecond, "the work queue is declared again without a claim")
	assert.True(t, enqueuedAndClaimed(t, q, ledger, "evt_after_cancel"), "messages are consumed again")
}

// TestAnEnqueueToAMissingWorkQueueFailsAndIsRecovered: between an
// operator deleting the work queue and the queue declaring it again, the
// broker took a publish to it, confirmed it and dropped it (unroutable),
// and the enqueue reported success. The publish is mandatory: the broker
// returns such a message, the enqueue fails naming the delivery and the
// broker's reason, and the record, still pending with no message, is
// published again by the worker's recovery and delivered.
func TestAnEnqueueToAMissingWorkQueueFailsAndIsRecovered(t *testing.T) {
	ctx := context.Background()
	ledger := memory.NewStore()
	cfg := testConfig(t)
	q := newQueue(t, ledger, cfg)
	release := q.HoldReconnects() // the window: the queue has not declared it again yet
	deleteQueue(t, cfg.Name+".work")

	rec := &hookrelaytest.Recipient{}
	c := brokertest.NewClient(t, q, ledger, rec, func(cfg *hookrelay.Config) { cfg.RecoverUnpublishedAfter = 300 * time.Millisecond })
	_, err := c.Enqueue(ctx, hookrelay.EnqueueParams{
		EventID: "evt_in_the_gap", TenantID: "tenant_a", DestinationID: "dest_1",
		EventType: "lease.payment_recorded", Payload: []byte(`{"payment_id":"pay_7319"}`),
	})
	id := hookrelay.DeliveryID("evt_in_the_gap", "dest_1")
	require.Error(t, err, "the broker dropped the message: the enqueue must not report it published")
	t.Logf("enqueue error: %v", err)
	assert.ErrorContains(t, err, id)
	assert.ErrorContains(t, err, "NO_ROUTE", "the broker's reason")
	d, err := ledger.Get(ctx, id)
	require.NoError(t, err)
	require.Equal(t, hookrelay.StatePending, d.State)

	release()
	require.NoError(t, c.Start(ctx))
	defer func() { require.NoError(t, c.Stop(ctx)) }()
	require.Eventually(t, func() bool { ok, _ := ledger.WasDelivered(ctx, id); return ok }, 15*time.Second, 10*time.Millisecond,
		"the recovery published it again and it was delivered")
	assert.Len(t, rec.RequestsFor(id), 1)
}

// TestAReleaseToAMissingWaitQueueKeepsTheMessage: a wait queue an
// operator deleted has no consumer whose cancel would tell the queue. A
// delayed redelivery published to it was confirmed and dropped, and the
// message it moved was acknowledged: gone from the broker. The broker now
// returns it, the message is handed back instead, and the queue
// reconnects, declaring the wait queue again.
func TestAReleaseToAMissingWaitQueueKeepsTheMessage(t *testing.T) {
	ctx := context.Background()
	ledger := memory.NewStore()
	cfg := testConfig(t)
	q := newQueue(t, ledger, cfg)
	claim := brokertest.ClaimOne(t, q, ledger, "whd_waits")
	deleteQueue(t, cfg.Name+".wait.20ms")

	now := time.Now()
	err := q.Release(ctx, hookrelay.ReleaseParams{ID: claim.Delivery.ID, Lease: claim.Lease, At: now.Add(10 * time.Millisecond), Now: now})
	t.Logf("release: %v", err)
	var got []hookrelay.Claim
	require.Eventually(t, func() bool {
		got, err = q.Claim(ctx, hookrelay.ClaimParams{Now: time.Now(), Limit: 1, LeaseFor: time.Minute, Holder: "w"})
		return err == nil && len(got) == 1
	}, 10*time.Second, 20*time.Millisecond, "the released message comes back")
	assert.Equal(t, "whd_waits", got[0].Delivery.ID)
	assert.GreaterOrEqual(t, q.Generation(), uint64(2), "the queue reconnected, declaring the wait queue again")
}

// TestReturnsAreMatchedByQueueAndMessageID: a delayed redelivery to a
// deleted wait queue and an enqueue to the work queue of the same
// delivery, awaiting their confirms together on the channel, took each
// other's return (returns were matched by message ID alone): the enqueue
// failed though the work queue had its message, and the redelivery
// reported success, so its message was acknowledged and dropped.
func TestReturnsAreMatchedByQueueAndMessageID(t *testing.T) {
	cfg := testConfig(t)
	q := newQueue(t, memory.NewStore(), cfg)
	defer q.HoldReconnects()() // the return would make the queue reconnect under the confirms
	wait := cfg.Name + ".wait.20ms"
	deleteQueue(t, wait)
	errs := q.PublishAtOnce(context.Background(), "whd_same", cfg.Name+".work", wait)
	assert.NoError(t, errs[0], "the work queue took its message")
	assert.ErrorContains(t, errs[1], "NO_ROUTE", "the wait queue's message was returned")
	assert.ErrorContains(t, errs[1], wait)
	require.NoError(t, q.Close()) // its consumer holds the work queue's messages
	assert.Equal(t, []string{"whd_same"}, workIDs(t, cfg))
}

// TestAnEnqueueDuringAReconnectWaitsForIt: a publish that finds the
// connection just dropped waits for the reconnect (the first attempt comes
// after Config.ReconnectDelay) instead of failing with ErrNotConnected:
// a brief drop is not an error for the caller of Enqueue.
func TestAnEnqueueDuringAReconnectWaitsForIt(t *testing.T) {
	ledger := memory.NewStore()
	q := newQueue(t, ledger, testConfig(t))
	q.DropConnection()
	assert.True(t, enqueuedAndClaimed(t, q, ledger, "evt_during_reconnect"), "the enqueue waited for the reconnect")
	assert.EqualValues(t, 2, q.Generation())
}

// TestAClaimDuringAReconnectWaitsForIt: like a publish, a claim that finds
// the connection just dropped waits for the first reconnect attempt
// instead of failing with ErrNotConnected, so a brief drop costs the
// worker no error and no backoff.
func TestAClaimDuringAReconnectWaitsForIt(t *testing.T) {
	ctx := context.Background()
	ledger := memory.NewStore()
	q := newQueue(t, ledger, testConfig(t))
	c := brokertest.NewClient(t, q, ledger, &hookrelaytest.Recipient{})
	id := brokertest.Enqueue(t, c, "evt_before_drop")
	q.DropConnection()
	time.Sleep(50 * time.Millisecond) // the queue noticed; it reconnects after ReconnectDelay (250ms)
	cs, err := q.Claim(ctx, hookrelay.ClaimParams{Now: time.Now(), Limit: 1, LeaseFor: time.Minute, Holder: "w"})
	require.NoError(t, err)
	if len(cs) == 0 { // the message may still be on its way after the reconnect
		require.Eventually(t, func() bool {
			cs, err = q.Claim(ctx, hookrelay.ClaimParams{Now: time.Now(), Limit: 1, LeaseFor: time.Minute, Holder: "w"})
			return err == nil && len(cs) == 1
		}, 5*time.Second, 20*time.Millisecond)
	}
	assert.Equal(t, id, cs[0].Delivery.ID)
}

// TestAnEnqueueCutByADropIsPublishedAfterTheReconnect: messages published
// just before the connection dropped, whose confirms never came, were
// reported as "refused by the broker"; they are published again on the
// new connection (at least once: a copy the broker did take is absorbed
// by the ledger).
func TestAnEnqueueCutByADropIsPublishedAfterTheReconnect(t *testing.T) {
	ctx := context.Background()
	ledger := memory.NewStore()
	cfg := testConfig(t)
	q, err := hookamqp.New(ctx, brokerURL(t), ledger, cfg)
	require.NoError(t, err)
	t.Cleanup(func() { _ = q.Close() }) // closing twice is harmless
	c := brokertest.NewClient(t, q, ledger, &hookrelaytest.Recipient{})
	const rounds, batch = 3, 300
	for round := range rounds {
		params := make([]hookrelay.EnqueueParams, batch)
		for i := range params {
			params[i] = hookrelay.EnqueueParams{EventID: fmt.Sprintf("evt_%d_%d", round, i), TenantID: "tenant_a",
				DestinationID: "dest_1", EventType: "t", Payload: []byte(`{}`)}
		}
		gen := q.Generation()
		done := make(chan error, 1)
		go func() { _, err := c.EnqueueMany(ctx, params); done <- err }()
		time.Sleep(time.Duration(round+1) * 2 * time.Millisecond)
		q.DropConnection()
		require.NoError(t, <-done, "round %d", round)
		require.Eventually(t, func() bool { return q.Generation() > gen }, 5*time.Second, 5*time.Millisecond)
	}
	require.NoError(t, q.Close())
	assert.GreaterOrEqual(t, depth(t, cfg)[cfg.Name+".work"], rounds*batch, "every delivery has a message")
}

// silentProxy is a loopback TCP proxy to the broker that can turn silent:
// then it cuts the connections it forwards and accepts new ones without a
// word, as a broker behind a black-holing network would. accepted
// receives once per silent connection. A connection taken while
// stallChannels is set is forwarded through the handshake, then stalls, as
// a broker that hung just after it would: the client's first channel.open
// and everything after it are swallowed; stalled receives once per
// swallowed channel.open.
type silentProxy struct {
	ln            net.Listener
	broker        string
	silent        atomic.Bool
	stallChannels atomic.Bool
	accepted      chan struct{}
	stalled       chan struct{}
	mu            sync.Mutex
	conns         []net.Conn
}

func newSilentProxy(t *testing.T) *silentProxy {
	t.Helper()
	u, err := amqp.ParseURI(brokerURL(t))
	require.NoError(t, err)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	p := &silentProxy{ln: ln, broker: net.JoinHostPort(u.Host, strconv.Itoa(u.Port)), accepted: make(chan struct{}, 16),
		stalled: make(chan struct{}, 16)}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			p.mu.Lock()
			p.conns = append(p.conns, c)
			p.mu.Unlock()
			if p.silent.Load() {
				p.accepted <- struct{}{}
				continue
			}
			up, err := net.Dial("tcp", p.broker)
			if err != nil {
				_ = c.Close()
				continue
			}
			p.mu.Lock()
			p.conns = append(p.conns, up)
			p.mu.Unlock()
			if p.stallChannels.Load() {
				go func() { forwardUntilChannelOpen(up, c, p.stalled); _ = up.Close() }()
			} else {
				go func() { _, _ = io.Copy(up, c); _ = up.Close() }()
			}
			go func() { _, _ = io.Copy(c, up); _ = c.Close() }()
		}
	}()
	t.Cleanup(func() {
		_ = ln.Close()
		<-done
		p.cut()
	})
	return p
}

// forwardUntilChannelOpen copies the client's AMQP stream to the broker
// up to the first channel.open, which ends the handshake, then tells
// stalled and reads and drops the rest until the client closes.
func forwardUntilChannelOpen(broker io.Writer, client io.Reader, stalled chan<- struct{}) {
	r := bufio.NewReader(client)
	header := make([]byte, 8) // "AMQP" 0 0 9 1
	if _, err := io.ReadFull(r, header); err != nil {
		return
	}
	if _, err := broker.Write(header); err != nil {
		return
	}
	for {
		// type (1), channel (2), size (4), payload, frame end (1)
		head := make([]byte, 7)
		if _, err := io.ReadFull(r, head); err != nil {
			return
		}
		frame := append(head, make([]byte, int(binary.BigEndian.Uint32(head[3:]))+1)...)
		if _, err := io.ReadFull(r, frame[7:]); err != nil {
			return
		}
		const methodFrame, classChannel, methodOpen = 1, 20, 10
		if frame[0] == methodFrame && len(frame) >= 12 &&
			binary.BigEndian.Uint16(frame[7:]) == classChannel && binary.BigEndian.Uint16(frame[9:]) == methodOpen {
			select {
			case stalled <- struct{}{}:
			default:
			}
			_, _ = io.Copy(io.Discard, r)
			return
		}
		if _, err := broker.Write(frame); err != nil {
			return
		}
	}
}

// url is the broker URL through the proxy.
func (p *silentProxy) url(t *testing.T) string {
	u, err := amqp.ParseURI(brokerURL(t))
	require.NoError(t, err)
	u.Host, u.Port = "127.0.0.1", p.ln.Addr().(*net.TCPAddr).Port
	return u.String()
}

// cut closes every connection the proxy made or took.
func (p *silentProxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		_ = c.Close()
	}
	p.conns = nil
}

// A broker that takes the TCP connection and never answers (a black-holing
// network, a hung node) held New for the client's 30 s connection timeout,
// whatever New's context said; New now gives up when its context ends.
func TestNewGivesUpWhenItsContextEnds(t *testing.T) {
	p := newSilentProxy(t)
	p.silent.Store(true)
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	url, cfg := p.url(t), testConfig(t)
	done := make(chan error, 1)
	go func() {
		q, err := hookamqp.New(ctx, url, memory.NewStore(), cfg)
		if err == nil {
			_ = q.Close()
		}
		done <- err
	}()
	select {
	case err := <-done:
		require.ErrorIs(t, err, hookamqp.ErrNotConnected)
		assert.ErrorIs(t, err, context.DeadlineExceeded)
	case <-time.After(20 * time.Second): // a hang, not a speed check
		t.Fatal("New kept waiting for the broker after its context ended")
	}
}

// Close while the queue reconnects to a broker that takes the connection
// and never answers: the reconnect attempt is abandoned, and Close returns
// instead of waiting out the client's 30 s connection timeout.
func TestCloseDuringAHungReconnectReturns(t *testing.T) {
	p := newSilentProxy(t)
	q, err := hookamqp.New(context.Background(), p.url(t), memory.NewStore(), testConfig(t))
	require.NoError(t, err)
	p.silent.Store(true)
	p.cut()
	select {
	case <-p.accepted: // the reconnect attempt waits for the broker's greeting
	case <-time.After(20 * time.Second):
		t.Fatal("the queue did not try to reconnect")
	}
	done := make(chan error, 1)
	go func() { done <- q.Close() }()
	select {
	case <-done:
	case <-time.After(20 * time.Second): // a hang, not a speed check
		t.Fatal("Close waited for the hung reconnect attempt")
	}
}

// The context given to New bounded the dial and the handshake only: a
// broker that stalled after the handshake held New in opening a channel,
// declaring or consuming, whatever its context said.
func TestNewGivesUpWhenTheBrokerStallsAfterTheHandshake(t *testing.T) {
	p := newSilentProxy(t)
	p.stallChannels.Store(true)
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	url, cfg := p.url(t), testConfig(t)
	done := make(chan error, 1)
	go func() {
		q, err := hookamqp.New(ctx, url, memory.NewStore(), cfg)
		if err == nil {
			_ = q.Close()
		}
		done <- err
	}()
	select {
	case err := <-done:
		require.ErrorIs(t, err, hookamqp.ErrNotConnected)
		assert.ErrorIs(t, err, context.DeadlineExceeded)
	case <-time.After(20 * time.Second): // a hang, not a speed check
		t.Fatal("New kept waiting for the stalled broker after its context ended")
	}
}

// Close while a reconnect attempt waits on a broker that stalled after
// the handshake: the attempt is abandoned and Close returns.
func TestCloseDuringAReconnectStalledAfterTheHandshakeReturns(t *testing.T) {
	p := newSilentProxy(t)
	q, err := hookamqp.New(context.Background(), p.url(t), memory.NewStore(), testConfig(t))
	require.NoError(t, err)
	p.stallChannels.Store(true)
	p.cut()
	select {
	case <-p.stalled: // the reconnect attempt waits for its channel
	case <-time.After(20 * time.Second):
		t.Fatal("the queue did not try to reconnect")
	}
	done := make(chan error, 1)
	go func() { done <- q.Close() }()
	select {
	case <-done:
	case <-time.After(20 * time.Second): // a hang, not a speed check
		t.Fatal("Close waited for the stalled reconnect attempt")
	}
}

// workIDs takes every message from the work queue of cfg and returns
// their delivery IDs. Call it after the queue closed.
func workIDs(t *testing.T, cfg hookamqp.Config) []string {
	t.Helper()
	conn, err := amqp.Dial(brokerURL(t))
	require.NoError(t, err)
	defer conn.Close()
	ch, err := conn.Channel()
	require.NoError(t, err)
	var ids []string
	for {
		m, ok, err := ch.Get(cfg.Name+".work", true)
		require.NoError(t, err)
		if !ok {
			return ids
		}
		ids = append(ids, m.MessageId)
	}
}

// A Config.MaxMessageBytes above the server's max_message_size (which
// AMQP does not tell the client) lets through a delivery the broker then
// refuses, closing the channel. That publish fails with an error naming
// the delivery, its size and the broker's limit, at once (publishing it
// again cannot help); the others of the call are published, and the
// queue reconnects and carries on. The server's limit is RabbitMQ's
// default here (128 MiB before RabbitMQ 4, 16 MiB since), nothing
// reconfigured: the delivery is made larger than both.
func TestAPublishOverTheServersLimitFailsNamingSizeAndLimit(t *testing.T) {
	ctx := context.Background()
	cfg := testConfig(t)
	cfg.MaxMessageBytes = 256 << 20
	q, err := hookamqp.New(ctx, brokerURL(t), memory.NewStore(), cfg)
	require.NoError(t, err)
	t.Cleanup(func() { _ = q.Close() }) // closing twice is harmless
	delivery := func(id string, payload []byte) hookrelay.Delivery {
		return hookrelay.Delivery{ID: id, EventID: "evt_" + id, DestinationID: "dest_1", Attempt: 1, Payload: payload, NextAttemptAt: time.Now()}
	}
	big := delivery("whd_big", make([]byte, 97<<20)) // about 129.3 MiB in base64
	env, err := hookrelay.MarshalEnvelope(big)
	require.NoError(t, err)
	err = q.Enqueue(ctx, []hookrelay.Delivery{delivery("whd_small_1", []byte(`{}`)), big, delivery("whd_small_2", []byte(`{}`))})
	if err == nil {
		t.Skip("the broker took a 129 MiB message: its max_message_size is above RabbitMQ's default")
	}
	t.Logf("enqueue error: %v", err)
	assert.ErrorContains(t, err, "whd_big")
	assert.NotContains(t, err.Error(), "whd_small")
	assert.ErrorContains(t, err, strconv.Itoa(len(env)), "the message's size")
	assert.ErrorContains(t, err, "max size", "the broker's limit, in its words")
	assert.ErrorContains(t, err, "MaxMessageBytes", "what to set")

	require.NoError(t, q.Enqueue(ctx, []hookrelay.Delivery{delivery("whd_after", []byte(`{}`))}), "the queue carries on")
	require.NoError(t, q.Close())
	ids := workIDs(t, cfg) // no claim: these deliveries have no ledger record, a claim would drop them
	assert.Contains(t, ids, "whd_after")
	assert.NotContains(t, ids, "whd_big")
	assert.Contains(t, ids, "whd_small_1", "published despite the refused one")
	assert.Contains(t, ids, "whd_small_2", "published despite the refused one")
}

// deleteQueue deletes the named queue through a connection of its own, as
// an operator would, and returns that connection (closed when the test
// ends).
func deleteQueue(t *testing.T, name string) *amqp.Connection {
	t.Helper()
	conn, err := amqp.Dial(brokerURL(t))
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close() })
	ch, err := conn.Channel()
	require.NoError(t, err)
	defer ch.Close()
	_, err = ch.QueueDelete(name, false, false, false)
	require.NoError(t, err)
	return conn
}
