// Package hookamqp is a hookrelay.Queue on RabbitMQ (AMQP 0-9-1), with no
// plugin. The broker decides when a delivery runs; a hookrelay.LeaseLedger
// (the memory or SQL store) decides what may run and keeps the evidence, so
// a redelivered or duplicated message is harmless.
//
// Topology, declared (idempotently) by New, all durable, all reached
// through the default exchange:
//
//   - Name+".work": the work queue the workers consume with manual
//     acknowledgements and a bounded prefetch.
//   - Name+".wait.<delay>": one wait queue per delay bucket, with that
//     message TTL and the work queue as its dead-letter route. A delayed
//     message (retry-at, release, a not-yet-due or skipped delivery) is
//     published to the bucket that holds its delay, rounded up, and
//     expires back into the work queue. Each queue has one TTL, so expiry
//     stays first-in first-out. A delay longer than the largest bucket
//     waits the largest bucket, is found not due by the ledger and waits
//     again.
//   - Name+".dead": the dead-letter queue operators read; each message
//     carries the reason in the Hookrelay-Dead-Letter-Reason header.
//
// A message carries the versioned envelope (hookrelay.MarshalEnvelope),
// never a destination's URL or secrets. Every publish is mandatory and
// waits for the broker's confirm: a message the broker returns because
// its queue is missing (deleted by an operator) fails its publish rather
// than being confirmed and dropped. When the connection drops, the broker
// cancels the consumer (its queue was deleted) or returns a message, the
// queue reconnects with backoff and declares the topology again; messages
// handed out on the dead channel were put back by the broker, so they are
// never acknowledged on the new channel (a delivery tag belongs to its
// channel) and their redelivery is absorbed by the ledger.
package hookamqp

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/hookrelay/hookrelay"
	"github.com/hookrelay/hookrelay/adapters/internal/brokerq"
	"github.com/hookrelay/hookrelay/adapters/internal/redact"
)

// HeaderDeadLetterReason carries the dead-letter reason (at most its first
// 256 bytes, "…" marking a cut; the ledger's record keeps more) on a message in
// the dead-letter queue.
const HeaderDeadLetterReason = "Hookrelay-Dead-Letter-Reason"

// HeaderDeliveryID carries the delivery ID on every message.
const HeaderDeliveryID = "Hookrelay-Delivery-Id"

// DefaultDelayBuckets are the wait queues' delays when Config.DelayBuckets
// is empty. With the default policy (1 s base, 15 min cap) a retry waits at
// most one bucket step longer than its schedule says. The 100 ms bucket is
// for messages that arrive a few milliseconds before their due time (one
// published while a claim waited for messages): without it they waited a
// whole second.
var DefaultDelayBuckets = []time.Duration{
	100 * time.Millisecond, time.Second, 5 * time.Second, 30 * time.Second, 2 * time.Minute, 10 * time.Minute, 15 * time.Minute,
}

// DefaultPrefetch is Config.Prefetch when it is zero: what a worker with
// the default Concurrency claims ahead (hookrelay.ClaimAhead times
// hookrelay.DefaultConcurrency, 128). It was 64, four times, before the
// worker claimed eight times its capacity ahead.
const DefaultPrefetch = hookrelay.ClaimAhead * hookrelay.DefaultConcurrency

// DefaultMaxMessageBytes is Config.MaxMessageBytes when it is zero:
// RabbitMQ 4's default max_message_size, 16 MiB.
const DefaultMaxMessageBytes = 16 << 20

// ErrNotConnected reports that the queue is between connections and its
// reconnect attempt failed; the worker backs off and claims again once it
// reconnected. A claim or publish waits for the first reconnect attempt
// after a drop (while its context allows) and fails with ErrNotConnected
// only when that attempt failed.
var ErrNotConnected = errors.New("hookamqp: not connected to the broker")

// Config configures a Queue. Zero fields take the documented defaults.
type Config struct {
	// Name prefixes every queue. Defaults to "hookrelay".
	Name string
	// DelayBuckets are the wait queues' delays, each at least 1 ms. A delay
	// is rounded up to the smallest bucket that holds it; the largest is
	// the longest the broker is asked to wait. Changing the set adds new
	// wait queues; old ones drain into the work queue and can be deleted.
	// Defaults to DefaultDelayBuckets.
	DelayBuckets []time.Duration
	// Prefetch bounds the unacknowledged messages this process holds:
	// claimed ones (in flight, and held by the worker for the slots about
	// to free) plus those pushed ahead. Set it to hookrelay.ClaimAhead (8)
	// times the worker's Concurrency (hookrelay.Config.Concurrency, default
	// 16): the worker claims that much ahead, one broker round trip
	// for many deliveries. A smaller value makes claims smaller (Concurrency
	// or less leaves slots idle while it holds claims); a larger one holds
	// messages another worker could run. At most 65535, what AMQP carries.
	// Defaults to DefaultPrefetch.
	Prefetch int
	// ClaimWait is how long one Claim lets the broker push messages that
	// are on their way when fewer than it asked for are at hand. Defaults
	// to 20ms.
	ClaimWait time.Duration
	// SkipDelay is how long a message for a destination the worker skips
	// (paused, disabled, at its concurrency limit) waits, rounded up to a
	// bucket, spending no attempt. Defaults to 1s.
	SkipDelay time.Duration
	// ParkDelay is how long a message written by a newer library (unknown
	// envelope version) waits, capped by the largest bucket; it is never
	// dropped. Defaults to the largest bucket.
	ParkDelay time.Duration
	// MaxMessageBytes is the largest message body the broker takes, its
	// max_message_size. A delivery whose envelope is larger is refused at
	// enqueue, naming Payload, before anything is stored (the queue's
	// hookrelay.MessageLimit ability): the broker would refuse its publish,
	// closing the channel, every time it was tried. Set it to the server's
	// value when that is not RabbitMQ 4's default (RabbitMQ 3.8–3.13 take
	// 128 MiB by default); AMQP does not tell the client the server's
	// value, so the queue cannot check it (rabbitmqctl eval
	// 'application:get_env(rabbit, max_message_size).' shows it). Set
	// above it, a larger delivery is stored and its publish fails with an
	// error naming its size and the server's limit; the other deliveries
	// of the call are published, and the queue reconnects. The refused
	// delivery stays pending with no message, and the worker's recovery
	// publishes it again (hookrelay.Config.RecoverUnpublishedAfter), each
	// time refused and each time closing the connection, which puts back
	// the messages the worker holds. Defaults to DefaultMaxMessageBytes.
	MaxMessageBytes int
	// ReconnectDelay is the first wait before reconnecting; it doubles up
	// to 30 s while the broker stays unreachable. Defaults to 250ms.
	ReconnectDelay time.Duration
	// Logger receives reconnects and every message acknowledged without
	// running, parked or dead-lettered as unreadable. Defaults to discard.
	Logger *slog.Logger
}

// Queue is a hookrelay.Queue on RabbitMQ. It is safe for concurrent use. It
// owns its connection: Close it after the worker stopped.
type Queue struct {
	*brokerq.Queue[handle]
	b *broker
}

var _ hookrelay.Queue = (*Queue)(nil)

var _ hookrelay.MessageLimit = (*Queue)(nil)

// MaxEnvelopeBytes implements hookrelay.MessageLimit: Config.MaxMessageBytes,
// so Client.Prepare refuses a delivery the broker would refuse to take (a
// payload over about three quarters of it, the envelope carrying it in
// base64). RabbitMQ counts the body only; the headers are small.
func (q *Queue) MaxEnvelopeBytes() int { return q.b.cfg.MaxMessageBytes }

// New connects to url, declares the topology and starts consuming. Claims
// are leased from ledger. ctx bounds New only, all of it (the dial, the
// broker's handshake, the declarations and the start of consuming): the
// queue keeps consuming after it ends. It fails,
// with ErrNotConnected, if the first connection fails; later drops are
// reconnected. A url that does not parse is refused with
// an error wrapping hookrelay.ErrInvalidConfig; no error or log record
// shows the url's user name or password.
func New(ctx context.Context, url string, ledger hookrelay.LeaseLedger, cfg Config) (*Queue, error) {
	if ledger == nil {
		return nil, fmt.Errorf("%w: hookamqp: ledger is required", hookrelay.ErrInvalidConfig)
	}
	if _, err := amqp.ParseURI(url); err != nil {
		return nil, &hookrelay.ValidationError{Err: hookrelay.ErrInvalidConfig, Field: "hookamqp broker URL",
			Problem: "does not parse: " + maskURL(err.Error(), url)}
	}
	if err := setDefaults(&cfg); err != nil {
		return nil, err
	}
	b := &broker{url: url, cfg: cfg, done: make(chan struct{}), stopped: make(chan struct{})}
	if err := b.connect(ctx); err != nil {
		return nil, err
	}
	q, err := brokerq.New[handle](b, ledger, brokerq.Config{
		MaxDelay: cfg.DelayBuckets[len(cfg.DelayBuckets)-1], SkipDelay: cfg.SkipDelay, ParkDelay: cfg.ParkDelay,
		ErrorDelay: cfg.DelayBuckets[0], ClaimWait: cfg.ClaimWait, Logger: cfg.Logger,
	})
	if err != nil {
		b.closeConn()
		return nil, err
	}
	// The reconnects' context, ended by Close: a reconnect attempt that
	// waits for a broker that never answers is abandoned.
	life, abort := context.WithCancel(context.Background())
	b.abort = abort
	go b.supervise(life)
	return &Queue{Queue: q, b: b}, nil
}

// Close stops reconnecting and closes the connection. Messages still held
// are put back by the broker. Closing twice is harmless.
func (q *Queue) Close() error {
	q.b.mu.Lock()
	if q.b.closing {
		q.b.mu.Unlock()
		<-q.b.stopped
		return nil
	}
	q.b.closing = true
	close(q.b.done)
	q.b.abort()
	q.b.mu.Unlock()
	<-q.b.stopped
	return q.b.closeConn()
}

func setDefaults(cfg *Config) error {
	bad := func(field, problem string) error {
		return &hookrelay.ValidationError{Err: hookrelay.ErrInvalidConfig, Field: "hookamqp.Config." + field, Problem: problem}
	}
	if cfg.Name == "" {
		cfg.Name = "hookrelay"
	}
	if len(cfg.DelayBuckets) == 0 {
		cfg.DelayBuckets = DefaultDelayBuckets
	}
	cfg.DelayBuckets = slices.Clone(cfg.DelayBuckets)
	slices.Sort(cfg.DelayBuckets)
	cfg.DelayBuckets = slices.Compact(cfg.DelayBuckets)
	if cfg.DelayBuckets[0] < time.Millisecond {
		return bad("DelayBuckets", "must each be at least 1ms")
	}
	switch {
	case cfg.Prefetch < 0:
		return bad("Prefetch", "must not be negative")
	case cfg.Prefetch > math.MaxUint16:
		// The protocol carries it in 16 bits; the client would wrap it.
		return bad("Prefetch", fmt.Sprintf("is %d, over AMQP's limit of %d", cfg.Prefetch, math.MaxUint16))
	case cfg.ClaimWait < 0:
		return bad("ClaimWait", "must not be negative")
	case cfg.SkipDelay < 0:
		return bad("SkipDelay", "must not be negative")
	case cfg.ParkDelay < 0:
		return bad("ParkDelay", "must not be negative")
	case cfg.MaxMessageBytes < 0:
		return bad("MaxMessageBytes", "must not be negative")
	case cfg.ReconnectDelay < 0:
		return bad("ReconnectDelay", "must not be negative")
	}
	if cfg.Prefetch == 0 {
		cfg.Prefetch = DefaultPrefetch
	}
	if cfg.ClaimWait == 0 {
		cfg.ClaimWait = 20 * time.Millisecond
	}
	if cfg.SkipDelay == 0 {
		cfg.SkipDelay = time.Second
	}
	if cfg.ParkDelay == 0 {
		cfg.ParkDelay = cfg.DelayBuckets[len(cfg.DelayBuckets)-1]
	}
	if cfg.MaxMessageBytes == 0 {
		cfg.MaxMessageBytes = DefaultMaxMessageBytes
	}
	if cfg.ReconnectDelay == 0 {
		cfg.ReconnectDelay = 250 * time.Millisecond
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return nil
}

func (c Config) workQueue() string { return c.Name + ".work" }
func (c Config) deadQueue() string { return c.Name + ".dead" }
func (c Config) waitQueue(d time.Duration) string {
	return fmt.Sprintf("%s.wait.%dms", c.Name, d.Milliseconds())
}

// handle is a message as the consumer received it, with the generation of
// the channel it came over.
type handle struct {
	d   amqp.Delivery
	gen uint64
}

// broker implements brokerq.Broker on one connection with a confirming
// publisher channel and a consumer channel, replaced on reconnect.
type broker struct {
	url string
	cfg Config

	mu         sync.Mutex
	closing    bool
	conn       *amqp.Connection
	pub        *publisher
	deliveries <-chan amqp.Delivery
	gen        uint64 // increases with every connection
	// handedOut counts the messages of this connection's consumer channel
	// that Fetch handed out and nobody has acknowledged or given back
	// yet. The broker pushes no more than Prefetch unacknowledged
	// messages, so a fetch never waits for more than Prefetch less these:
	// they cannot come until some are settled.
	handedOut int
	// These receive when the connection or the consumer channel closes
	// (the publisher's own listener tells of the publisher channel): a
	// channel closed by the broker (an exception) takes the connection
	// down with it, so the queue always reconnects as a whole.
	connClosed, consClosed chan *amqp.Error
	// consCancelled receives when the broker cancels the consumer and
	// leaves its channel open (the work queue was deleted, or the node
	// holding it went away): nothing would arrive again, and until the
	// work queue is declared again the broker drops what is published to
	// it. supervise reconnects then too, as for a drop.
	consCancelled chan string
	// unroutable receives when the broker returned a message published on
	// this connection because no queue took it (an operator deleted it):
	// supervise reconnects, which declares the queues again.
	unroutable chan struct{}
	// attempted is closed when the next connection attempt (supervise's
	// reconnect) has succeeded or failed, and replaced; lastErr is the
	// last attempt's failure, nil once connected. A publish that finds the
	// connection gone waits for that attempt, unless the broker was
	// already found unreachable.
	attempted chan struct{}
	lastErr   error

	// hold, when not nil, holds supervise's answer to a lost connection
	// or consumer until it is closed: tests use it to act in the window
	// before the queue reconnects.
	hold chan struct{}

	done    chan struct{}      // closed by Close
	abort   context.CancelFunc // called by Close: ends supervise's context
	stopped chan struct{}      // closed when supervise returns
}

// connect dials, declares the topology and starts consuming. ctx bounds
// all of it: its end closes the connection, which fails the step waiting
// for the broker.
func (b *broker) connect(ctx context.Context) error {
	conn, stop, err := dial(ctx, b.url, amqp.Config{Properties: amqp.Table{"connection_name": b.cfg.Name + " hookrelay queue"}})
	if ctxErr := ctx.Err(); err != nil && ctxErr != nil {
		return fmt.Errorf("%w: %w", ErrNotConnected, ctxErr)
	}
	if err != nil {
		return fmt.Errorf("%w: %s", ErrNotConnected, maskURL(err.Error(), b.url))
	}
	fail := func(step string, err error) error {
		stop()
		_ = conn.Close()
		if ctxErr := ctx.Err(); ctxErr != nil {
			return fmt.Errorf("%w: %w", ErrNotConnected, ctxErr)
		}
		return fmt.Errorf("hookamqp: %s: %s", step, err.Error())
	}
	pub, err := conn.Channel()
	if err != nil {
		return fail("open publisher channel", err)
	}
	if err := declare(pub, b.cfg); err != nil {
		return fail("declare queues", err)
	}
	if err := pub.Confirm(false); err != nil {
		return fail("enable publisher confirms", err)
	}
	cons, err := conn.Channel()
	if err != nil {
		return fail("open consumer channel", err)
	}
	if err := cons.Qos(b.cfg.Prefetch, 0, false); err != nil {
		return fail("set prefetch", err)
	}
	// Without ctx's cancellation: the client cancels the consumer when
	// that context ends, and New's caller may end it as soon as New
	// returned; the queue then consumed nothing, ever again.
	deliveries, err := cons.ConsumeWithContext(context.WithoutCancel(ctx), b.cfg.workQueue(), "", false, false, false, false, nil)
	if err != nil {
		return fail("consume", err)
	}
	if !stop() {
		// ctx ended as the last step finished: it closed the connection.
		return fail("consume", ctx.Err())
	}
	unroutable := make(chan struct{}, 1)
	b.mu.Lock()
	b.conn, b.pub, b.deliveries = conn, newPublisher(pub, unroutable), deliveries
	b.unroutable = unroutable
	b.connClosed = conn.NotifyClose(make(chan *amqp.Error, 1))
	b.consClosed = cons.NotifyClose(make(chan *amqp.Error, 1))
	b.consCancelled = cons.NotifyCancel(make(chan string, 1))
	b.gen++
	b.handedOut = 0 // the old channel's messages went back with it
	b.attemptedLocked(nil)
	b.mu.Unlock()
	return nil
}

// attemptedLocked records the end of a connection attempt (err nil: it
// succeeded) and wakes the publishes waiting for it. b.mu must be held.
func (b *broker) attemptedLocked(err error) {
	b.lastErr = err
	if b.attempted != nil {
		close(b.attempted)
	}
	b.attempted = make(chan struct{})
}

// dialTimeout bounds the TCP dial and the AMQP handshake when the URL sets
// no connection_timeout: the client's own default.
const dialTimeout = 30 * time.Second

// dial is amqp.DialConfig with ctx bounding the TCP dial and what follows
// (the client honours a timeout, not a context, and only for the dial
// and the handshake): ctx's end closes the connection, until stop is
// called. stop reports false when ctx ended first. On error, dial stopped
// it already.
func dial(ctx context.Context, url string, cfg amqp.Config) (conn *amqp.Connection, stop func() bool, err error) {
	timeout := dialTimeout
	if u, err := amqp.ParseURI(url); err == nil && u.ConnectionTimeout > 0 {
		timeout = time.Duration(u.ConnectionTimeout) * time.Millisecond
	}
	cfg.Dial = func(network, addr string) (net.Conn, error) {
		conn, err := (&net.Dialer{Timeout: timeout}).DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		// The handshake's deadline, as the client's own dial sets it; the
		// client clears it once connected.
		if err := conn.SetDeadline(time.Now().Add(timeout)); err != nil {
			_ = conn.Close()
			return nil, err
		}
		// ctx's end cuts the handshake, or a step after it, short (then
		// ctx.Err is set).
		stop = context.AfterFunc(ctx, func() { _ = conn.Close() })
		return conn, nil
	}
	conn, err = amqp.DialConfig(url, cfg)
	if err != nil {
		if stop != nil {
			stop()
		}
		return nil, nil, err
	}
	return conn, stop, nil
}

func declare(ch *amqp.Channel, cfg Config) error {
	if _, err := ch.QueueDeclare(cfg.workQueue(), true, false, false, false, nil); err != nil {
		return err
	}
	if _, err := ch.QueueDeclare(cfg.deadQueue(), true, false, false, false, nil); err != nil {
		return err
	}
	for _, d := range cfg.DelayBuckets {
		_, err := ch.QueueDeclare(cfg.waitQueue(d), true, false, false, false, amqp.Table{
			"x-message-ttl":             d.Milliseconds(),
			"x-dead-letter-exchange":    "",
			"x-dead-letter-routing-key": cfg.workQueue(),
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// supervise reconnects after the connection drops, the broker cancels
// the consumer or returns a message as unroutable, until Close.
func (b *broker) supervise(ctx context.Context) {
	defer close(b.stopped)
	for {
		b.mu.Lock()
		conn, pub, connClosed, consClosed, consCancelled, unroutable := b.conn, b.pub, b.connClosed, b.consClosed, b.consCancelled, b.unroutable
		b.mu.Unlock()
		var cause *amqp.Error
		select {
		case <-b.done:
			return
		case cause = <-connClosed:
		case <-pub.gone:
			cause = pub.closeCause()
		case cause = <-consClosed:
		case _, ok := <-consCancelled:
			cause = &amqp.Error{Reason: "the broker cancelled the consumer (its queue deleted, or its node gone)"}
			if !ok {
				// The consumer channel closed, which closes this listener
				// after telling consClosed why.
				cause = <-consClosed
			}
		case <-unroutable:
			cause = &amqp.Error{Reason: "the broker returned a message as unroutable (a queue deleted)"}
		}
		b.mu.Lock()
		hold := b.hold
		b.mu.Unlock()
		if hold != nil {
			select {
			case <-hold:
			case <-b.done:
				return
			}
		}
		b.cfg.Logger.Warn("hookamqp: connection lost; reconnecting", "error", fmt.Sprint(cause))
		b.mu.Lock()
		b.pub, b.deliveries = nil, nil
		b.mu.Unlock()
		_ = conn.Close() // a channel closed alone: drop the rest with it
		wait := b.cfg.ReconnectDelay
		for {
			timer := time.NewTimer(wait)
			select {
			case <-b.done:
				timer.Stop()
				return
			case <-timer.C:
			}
			if err := b.connect(ctx); err != nil {
				b.mu.Lock()
				b.attemptedLocked(err)
				b.mu.Unlock()
				b.cfg.Logger.Warn("hookamqp: reconnect failed", "error", err, "retry_in", wait)
				wait = min(2*wait, 30*time.Second)
				continue
			}
			b.cfg.Logger.Info("hookamqp: reconnected")
			break
		}
	}
}

func (b *broker) closeConn() error {
	b.mu.Lock()
	conn := b.conn
	b.mu.Unlock()
	if conn == nil || conn.IsClosed() {
		return nil
	}
	return translate(conn.Close())
}

// send publishes one persistent message on the confirming channel; wait
// for its confirm with confirm, then sync its publisher and take its
// return. A connection found gone (it dropped and supervise reconnects)
// is waited for, through the next connection attempt, while ctx allows: a brief drop does not fail an enqueue. Once
// an attempt failed (the broker is unreachable), send fails at once with
// ErrNotConnected.
func (b *broker) send(ctx context.Context, queue string, msg amqp.Publishing) (sent, error) {
	msg.DeliveryMode = amqp.Persistent
	msg.ContentType = "application/json"
	for waited := false; ; waited = true {
		b.mu.Lock()
		pub, attempted, lastErr := b.pub, b.attempted, b.lastErr
		b.mu.Unlock()
		if pub != nil && !pub.ch.IsClosed() {
			// Mandatory: a message no queue takes (its queue was deleted)
			// is returned before it is confirmed, not confirmed and
			// dropped.
			dc, err := pub.ch.PublishWithDeferredConfirmWithContext(ctx, "", queue, true, false, msg)
			if err == nil || waited || !errors.Is(err, amqp.ErrClosed) {
				return sent{dc, pub, len(msg.Body), msg.MessageId}, translate(err)
			}
			// Closed under the publish: wait for the reconnect.
		}
		if err := b.awaitAttempt(ctx, attempted, lastErr, waited); err != nil {
			return sent{}, err
		}
	}
}

// sent is a publish awaiting its confirm, with the channel it went on,
// the size of its body and its message ID (the delivery ID).
type sent struct {
	dc   *amqp.DeferredConfirmation
	pub  *publisher
	size int
	id   string
}

// publisher is the confirming channel publishes go on, with a close
// listener of its own, to tell why it closed, and the messages the broker
// returned on it as unroutable.
type publisher struct {
	ch     *amqp.Channel
	closed chan *amqp.Error
	once   sync.Once
	cause  *amqp.Error

	// returns is the channel's return listener, unbuffered: the client
	// hands it a return before it handles the confirm that follows, so
	// once collect took a return and a publish saw its confirm, a sync
	// with collect (it takes from synced only between returns) finds the
	// return recorded.
	returns chan amqp.Return
	synced  chan struct{}
	gone    chan struct{} // closed when collect returned
	mu      sync.Mutex
	// returned holds, by returnKey (the queue and the message ID), the
	// returns no publish has claimed yet: a delayed redelivery to a
	// deleted wait queue and an enqueue of the same delivery to the work
	// queue do not take each other's return. A message published twice
	// at once to one queue is told apart by count only: as many of its
	// publishes fail as the broker returned, so a publish reported
	// confirmed always has a copy queued.
	returned map[string][]amqp.Return
}

// newPublisher listens for ch's closing and its returns; unroutable
// receives (without blocking) on every return.
func newPublisher(ch *amqp.Channel, unroutable chan<- struct{}) *publisher {
	p := &publisher{
		ch:       ch,
		closed:   ch.NotifyClose(make(chan *amqp.Error, 1)),
		returns:  ch.NotifyReturn(make(chan amqp.Return)),
		synced:   make(chan struct{}),
		gone:     make(chan struct{}),
		returned: map[string][]amqp.Return{},
	}
	go p.collect(unroutable)
	return p
}

// collect records the channel's returns until it closes (the client
// closes the listener then).
func (p *publisher) collect(unroutable chan<- struct{}) {
	defer close(p.gone)
	for {
		select {
		case r, ok := <-p.returns:
			if !ok {
				return
			}
			p.mu.Lock()
			k := returnKey(r.RoutingKey, r.MessageId)
			p.returned[k] = append(p.returned[k], r)
			p.mu.Unlock()
			select {
			case unroutable <- struct{}{}:
			default:
			}
		case <-p.synced:
		}
	}
}

// sync waits until collect recorded every return the client handed it
// before a confirm this goroutine saw: the client delivers a message's
// return before the confirm that follows it on the same channel, so after
// the last confirm of a group, one sync covers the returns of the whole
// group.
func (p *publisher) sync() {
	select {
	case p.synced <- struct{}{}:
	case <-p.gone:
	}
}

// take returns the error for a publish of message ID id to queue that
// the broker returned, when it did: call it once the publish was
// confirmed and p synced after that confirm.
func (p *publisher) take(queue, id string) error {
	k := returnKey(queue, id)
	p.mu.Lock()
	defer p.mu.Unlock()
	rs := p.returned[k]
	if len(rs) == 0 {
		return nil
	}
	r := rs[0]
	if len(rs) == 1 {
		delete(p.returned, k)
	} else {
		p.returned[k] = rs[1:]
	}
	return &unroutedError{queue: queue, code: r.ReplyCode, reason: r.ReplyText}
}

// returnKey keys a return by the queue a message was published to (its
// routing key: every publish goes through the default exchange) and its
// message ID.
func returnKey(queue, id string) string { return queue + "\x00" + id }

// unroutedError reports a message the broker returned because no queue
// took it: its queue does not exist (an operator deleted it). The broker
// confirms such a message all the same; it does not have it. The queue
// reconnects, which declares its queues again.
type unroutedError struct {
	queue  string
	code   uint16
	reason string
}

func (e *unroutedError) Error() string {
	return fmt.Sprintf("hookamqp: publish to %s: the broker returned the message, unpublished (%d %s): the queue is missing; it is declared again", e.queue, e.code, e.reason)
}

// closeCause is why ch closed: nil when the client closed it. Call it only
// once ch is closed and a confirm on it failed, or gone is closed: the
// client has told the listener by then (it closes the return listener
// and fails confirms after it told and closed the close listeners).
func (p *publisher) closeCause() *amqp.Error {
	p.once.Do(func() { p.cause = <-p.closed })
	return p.cause
}

// refusedError reports that the broker closed the publisher channel with
// PRECONDITION_FAILED while a publish awaited its confirm: on the
// publisher channel, which only publishes to the default exchange with no
// expiration or user ID, that is a message over the server's
// max_message_size. The broker's reason names its size and the limit.
// The message is not on the broker, and publishing it again is refused
// again.
type refusedError struct {
	size   int
	reason string
}

func (e *refusedError) Error() string {
	return fmt.Sprintf("hookamqp: the broker refused the %d-byte message and closed the channel (%s): Config.MaxMessageBytes must not exceed the server's max_message_size", e.size, e.reason)
}

// errConfirmLost reports that the channel closed before the broker
// confirmed a publish: the broker may or may not have the message, and the
// publish is tried again on the next connection (a copy it did take is
// absorbed by the ledger).
var errConfirmLost = errors.New("hookamqp: the channel closed before the broker confirmed the publish")

// awaitAttempt waits, for an operation that found the connection gone,
// for the connection attempt attempted reports, while ctx allows. It
// fails at once with ErrNotConnected when the last attempt failed
// (lastErr: the broker is unreachable, or refused the topology) or the
// operation waited already.
func (b *broker) awaitAttempt(ctx context.Context, attempted <-chan struct{}, lastErr error, waited bool) error {
	if errors.Is(lastErr, ErrNotConnected) {
		return lastErr // connect's dial error says so already
	}
	if lastErr != nil {
		return fmt.Errorf("%w: %s", ErrNotConnected, lastErr.Error())
	}
	if waited {
		return ErrNotConnected
	}
	select {
	case <-attempted:
		return nil
	case <-b.done:
		return ErrNotConnected
	case <-ctx.Done():
		return fmt.Errorf("%w: %w", ErrNotConnected, ctx.Err())
	}
}

// confirm waits for s's confirm: errConfirmLost when its channel closed
// first, a *refusedError when the broker closed it refusing a message
// (which one, when several awaited their confirms, it does not say). A
// confirmed message may still have been returned: sync its publisher
// and take its return.
func confirm(ctx context.Context, queue string, s sent) error {
	ok, err := s.dc.WaitContext(ctx)
	if err != nil {
		return translate(err)
	}
	if !ok {
		if s.pub.ch.IsClosed() {
			if cause := s.pub.closeCause(); cause != nil && cause.Code == amqp.PreconditionFailed {
				return &refusedError{size: s.size, reason: cause.Reason}
			}
			return errConfirmLost
		}
		return fmt.Errorf("hookamqp: publish to %s: refused by the broker", queue)
	}
	return nil
}

// publish sends one persistent message and waits for the broker's
// confirm. It is for moving a consumed message (delayed redelivery,
// dead-letter): a confirm cut off by a connection drop is an error, not
// tried again, since the drop put the consumed message back already.
func (b *broker) publish(ctx context.Context, queue string, msg amqp.Publishing) error {
	s, err := b.send(ctx, queue, msg)
	if err != nil {
		return err
	}
	if err := confirm(ctx, queue, s); err != nil {
		return err
	}
	s.pub.sync()
	return s.pub.take(queue, s.id)
}

// Publish sends every envelope, then waits for every confirm, so a batch
// costs one round trip rather than one per delivery. The envelopes whose
// confirms a connection drop cut off are sent once more, after the
// reconnect. When the broker refuses a message of a batch (over its
// max_message_size, which AMQP does not tell the client), it closes the
// channel without saying which: the envelopes left unconfirmed are sent
// again one at a time, smallest first, after the reconnect, so the others
// are published and the error names the refused one. An envelope the
// broker returns (the work queue is missing: an operator deleted it, and
// the queue has not declared it again yet) fails, naming the broker's
// reason; its record stays pending with no message, for the caller to
// enqueue again or the worker's recovery to publish. A delivery that
// cannot be published does not keep the others from being published; the
// error names each one that failed.
func (b *broker) Publish(ctx context.Context, ds []hookrelay.Delivery) error {
	msgs := make([]amqp.Publishing, len(ds))
	for i, d := range ds {
		body, err := hookrelay.MarshalEnvelope(d)
		if err != nil {
			return &hookrelay.OpError{Op: "queue.enqueue", DeliveryID: d.ID, Err: err}
		}
		msgs[i] = amqp.Publishing{MessageId: d.ID, Headers: amqp.Table{HeaderDeliveryID: d.ID}, Body: body}
	}
	var errs []error
	fail := func(i int, err error) {
		errs = append(errs, &hookrelay.OpError{Op: "queue.enqueue", DeliveryID: ds[i].ID, Err: err})
	}
	todo := make([]int, len(ds)) // sent together
	for i := range todo {
		todo[i] = i
	}
	var alone []int               // sent one at a time, smallest first
	lost := make([]bool, len(ds)) // a confirm cut off by a drop once
	for len(todo) > 0 || len(alone) > 0 {
		group := todo
		if len(group) == 0 {
			group, alone = alone[:1], alone[1:]
		}
		todo = nil
		ss := make([]sent, len(group))
		for j, i := range group {
			var err error
			if ss[j], err = b.send(ctx, b.cfg.workQueue(), msgs[i]); err != nil {
				fail(i, err)
				return errors.Join(errs...)
			}
		}
		// Every confirm first, then one sync per publisher the group went
		// on: the returns of the whole group are recorded by then.
		confirms := make([]error, len(group))
		var pubs []*publisher // a reconnect under the group puts it on several
		for j := range group {
			confirms[j] = confirm(ctx, b.cfg.workQueue(), ss[j])
			if !slices.Contains(pubs, ss[j].pub) {
				pubs = append(pubs, ss[j].pub)
			}
		}
		for _, p := range pubs {
			p.sync()
		}
		for j, i := range group {
			err := confirms[j]
			if err == nil {
				err = ss[j].pub.take(b.cfg.workQueue(), ss[j].id)
			}
			var refused *refusedError
			switch {
			case err == nil:
			case errors.As(err, &refused) && len(group) > 1:
				alone = append(alone, i)
			case errors.Is(err, errConfirmLost) && !lost[i] && len(group) > 1:
				lost[i] = true
				todo = append(todo, i)
			case errors.Is(err, errConfirmLost) && !lost[i]:
				lost[i] = true
				alone = append(alone, i)
			default:
				fail(i, err)
			}
		}
		slices.SortStableFunc(alone, func(x, y int) int { return cmp.Compare(len(msgs[x].Body), len(msgs[y].Body)) })
	}
	return errors.Join(errs...)
}

func (b *broker) Fetch(ctx context.Context, n int, wait time.Duration) ([]handle, error) {
	var (
		deliveries <-chan amqp.Delivery
		gen        uint64
		limit      int
	)
	// A connection found gone is waited for, as a publish waits: through
	// the first reconnect attempt.
	for waited := false; ; waited = true {
		b.mu.Lock()
		deliveries, gen = b.deliveries, b.gen
		attempted, lastErr := b.attempted, b.lastErr
		// A worker that claims ahead asks for more than the prefetch
		// window lets through while it holds claims: waiting for those
		// would cost every claim the whole wait.
		limit = min(n, b.cfg.Prefetch-b.handedOut)
		b.mu.Unlock()
		if deliveries != nil {
			break
		}
		if err := b.awaitAttempt(ctx, attempted, lastErr, waited); err != nil {
			return nil, err
		}
	}
	n = limit
	var out []handle
	if n <= 0 {
		return out, nil
	}
	timer := time.NewTimer(wait)
	defer timer.Stop()
	for len(out) < n {
		select {
		case d, ok := <-deliveries:
			if !ok {
				// The channel closed, or the broker cancelled the
				// consumer: supervise reconnects.
				return out, nil
			}
			out = append(out, handle{d: d, gen: gen})
			b.mu.Lock()
			if gen == b.gen {
				b.handedOut++
			}
			b.mu.Unlock()
		case <-timer.C:
			return out, nil
		case <-ctx.Done():
			return out, nil
		}
	}
	return out, nil
}

func (b *broker) Body(h handle) []byte { return h.d.Body }

func (b *broker) Stale(h handle) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return h.gen != b.gen || b.pub == nil
}

// errChannelGone is returned when a message's channel closed before it
// could be acknowledged: the broker put it back and the ledger will absorb
// its redelivery.
var errChannelGone = errors.New("hookamqp: the message's channel closed before the acknowledgement; the broker redelivers it and the ledger absorbs it")

func (b *broker) Ack(_ context.Context, h handle) error {
	if b.Stale(h) {
		return errChannelGone
	}
	if err := h.d.Ack(false); err != nil {
		return errChannelGone
	}
	b.settled(h)
	return nil
}

// settled counts h as no longer handed out: acknowledged or given back.
func (b *broker) settled(h handle) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if h.gen == b.gen && b.handedOut > 0 {
		b.handedOut--
	}
}

func (b *broker) Redeliver(ctx context.Context, h handle, delay time.Duration, next *hookrelay.Delivery) error {
	if b.Stale(h) {
		return nil // put back by the broker already; the ledger delays it again
	}
	if delay <= 0 {
		// An error means the channel just closed: the broker puts the
		// message back all the same.
		_ = h.d.Nack(false, true)
		b.settled(h)
		return nil
	}
	body := h.d.Body
	if next != nil {
		if env, err := hookrelay.MarshalEnvelope(*next); err == nil {
			body = env
		}
	}
	id := h.d.MessageId
	err := b.publish(ctx, b.cfg.waitQueue(brokerq.Bucket(b.cfg.DelayBuckets, delay)), amqp.Publishing{
		MessageId: id, Headers: amqp.Table{HeaderDeliveryID: id}, Body: body,
	})
	if err != nil {
		// Not delayed: hand it back now rather than hold it; the ledger
		// refuses it until it is due.
		_ = h.d.Nack(false, true)
		b.settled(h)
		return err
	}
	return b.Ack(ctx, h)
}

func (b *broker) DeadLetter(ctx context.Context, h handle, d *hookrelay.Delivery, reason string) error {
	msg := amqp.Publishing{Headers: amqp.Table{HeaderDeadLetterReason: reason}, Body: h.d.Body}
	if d != nil {
		body, err := hookrelay.MarshalEnvelope(*d)
		if err != nil {
			return err
		}
		msg.Body, msg.MessageId = body, d.ID
		msg.Headers[HeaderDeliveryID] = d.ID
	}
	if err := b.publish(ctx, b.cfg.deadQueue(), msg); err != nil {
		return err
	}
	return b.Ack(ctx, h)
}

// maskURL returns text (an error about rawURL) with rawURL's user
// information masked. A URL that does not parse is quoted whole by the
// parser, and a reserved character in the password makes it quote a piece
// of it (`invalid port ":pa" after host`): when any piece of the password
// is left after masking the URL, the parser's words are replaced by what
// to do about it.
func maskURL(text, rawURL string) string {
	start := 0
	if i := strings.Index(rawURL, "://"); i >= 0 {
		start = i + len("://")
	}
	at := strings.LastIndex(rawURL, "@")
	if at <= start {
		return redact.Text(text, maxErrorText)
	}
	masked := rawURL[:start] + redact.Mask + rawURL[at:]
	quoted := strconv.Quote(rawURL)
	text = strings.ReplaceAll(text, quoted[1:len(quoted)-1], masked)
	text = strings.ReplaceAll(text, rawURL, masked)
	secret := rawURL[start:at]
	if _, password, ok := strings.Cut(secret, ":"); ok {
		secret = password
	}
	for n, i := min(3, len(secret)), 0; n > 0 && i+n <= len(secret); i++ {
		if strings.Contains(text, secret[i:i+n]) {
			return masked + ": percent-encode any reserved character (? # @ : / %) in its user name and password"
		}
	}
	return redact.Text(text, maxErrorText)
}

// maxErrorText bounds the broker's words in an error: room for the URL
// parser's advice on percent-encoding.
const maxErrorText = 1024

// translate keeps client error types out of the public API.
func translate(err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("hookamqp: %s", err.Error())
}
