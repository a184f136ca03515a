// Package hooknats is a hookrelay.Queue on NATS JetStream. The broker
// decides when a delivery runs; a hookrelay.LeaseLedger (the memory or SQL
// store) decides what may run and keeps the evidence, so a redelivered or
// duplicated message is harmless.
//
// A message carries the versioned envelope (hookrelay.MarshalEnvelope):
// the delivery's identity, routing and payload, never a destination's URL
// or secrets. Publishing waits for the server's acknowledgement. When the
// consumer hands a message out, the queue asks the ledger for a lease and
// returns the ledger's record: a delivered or dead record's message is
// acknowledged and dropped, a not-yet-due one is redelivered when due, one
// leased by another worker is redelivered after that lease. Retry-at and
// release are negative acknowledgements with a delay (the same message,
// the same delivery ID); dead-letter publishes the envelope to a separate
// dead-letter stream with the reason in the Hookrelay-Dead-Letter-Reason
// header, then acknowledges the original.
//
// New creates (or updates) the work stream, the dead-letter stream and the
// durable pull consumer; see Config for the settings and why they are set
// as they are.
package hooknats

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/hookrelay/hookrelay"
	"github.com/hookrelay/hookrelay/adapters/internal/brokerq"
)

// HeaderDeadLetterReason carries the dead-letter reason (at most its first
// 256 bytes, "…" marking a cut; the ledger's record keeps more) on a message in
// the dead-letter stream.
const HeaderDeadLetterReason = "Hookrelay-Dead-Letter-Reason"

// HeaderDeliveryID carries the delivery ID on every message, so operators
// can find a delivery's messages without decoding envelopes. The ID is
// query-escaped (url.QueryEscape; url.QueryUnescape reads it back): the
// server trims the blanks around a header value and turns line breaks into
// spaces, so " whd_1" sent raw would read as "whd_1". A generated ID
// (letters, digits, '_') is its own escape. The envelope carries the ID
// as it is.
const HeaderDeliveryID = "Hookrelay-Delivery-Id"

// Config configures a Queue. Zero fields take the documented defaults.
type Config struct {
	// Stream is the work stream's name. Defaults to "HOOKRELAY". It uses
	// work-queue retention: an acknowledged message is removed.
	Stream string
	// Subject is where envelopes are published. Defaults to
	// "hookrelay.deliveries".
	Subject string
	// DeadLetterStream and DeadLetterSubject are the dead-letter path, a
	// separate stream with limits retention that operators read.
	// Default to Stream+"_DEAD" and Subject+".dead".
	DeadLetterStream  string
	DeadLetterSubject string
	// Consumer is the durable pull consumer shared by every worker.
	// Defaults to "hookrelay-worker".
	Consumer string
	// AckWait is how long the server waits for a handed-out message before
	// it offers it to another worker. It must exceed the worker's LeaseFor
	// (hookrelay.Config.LeaseFor, default 2m), which itself exceeds the
	// longest send timeout; Claim refuses a longer lease. Defaults to 5m.
	AckWait time.Duration
	// MaxAge drops messages older than this from the work stream. A dropped
	// message strands its pending delivery until it is enqueued again, so
	// it must exceed the longest time a delivery can stay pending: its
	// delivery window (Policy.MaxAge), or its whole retry schedule, plus any
	// time its destination stays paused. Defaults to 0: no limit.
	MaxAge time.Duration
	// DeadLetterMaxAge is how long dead-letter messages are kept. The ledger
	// keeps the dead record regardless. Defaults to 0: no limit.
	DeadLetterMaxAge time.Duration
	// MaxRedeliveryDelay caps every delay the broker is asked to wait. A
	// delivery due later is handed out after this delay, found not due by
	// the ledger and delayed again, so the broker never sleeps through a
	// schedule the ledger changed. Defaults to 1m.
	MaxRedeliveryDelay time.Duration
	// SkipDelay is how long a message for a destination the worker skips
	// (paused, disabled, at its concurrency limit) waits before it is
	// offered again, spending no attempt. Defaults to 1s.
	SkipDelay time.Duration
	// ParkDelay is how long a message written by a newer library (unknown
	// envelope version) waits before it is offered again; it is never
	// dropped. Defaults to 1h.
	ParkDelay time.Duration
	// Replicas is the streams' replica count. Defaults to 1.
	Replicas int
	// Logger receives a record for every message acknowledged without
	// running, parked or dead-lettered as unreadable. Defaults to discard.
	Logger *slog.Logger
}

// Queue is a hookrelay.Queue on a JetStream stream and durable pull
// consumer. It is safe for concurrent use. It does not own the NATS
// connection: close it after the worker stopped.
type Queue struct {
	*brokerq.Queue[jetstream.Msg]
	b *broker
}

var _ hookrelay.Queue = (*Queue)(nil)

// headerRoom is what a message's headers may take of the server's
// max_payload, which counts headers and data together: the delivery ID
// header, the escaped message ID, a dead letter's cut reason.
const headerRoom = 4 << 10

var _ hookrelay.MessageLimit = (*Queue)(nil)

// MaxEnvelopeBytes implements hookrelay.MessageLimit: the connection's
// max_payload less room for the headers, so Client.Prepare refuses a
// delivery the server would refuse to store (a payload over about three
// quarters of max_payload, the envelope carrying it in base64).
func (q *Queue) MaxEnvelopeBytes() int {
	return int(q.b.js.Conn().MaxPayload()) - headerRoom
}

// New creates or updates the streams and the consumer and returns a Queue
// whose claims are leased from ledger. Errors name the failing step.
func New(ctx context.Context, js jetstream.JetStream, ledger hookrelay.LeaseLedger, cfg Config) (*Queue, error) {
	if js == nil || ledger == nil {
		return nil, fmt.Errorf("%w: hooknats: JetStream and ledger are required", hookrelay.ErrInvalidConfig)
	}
	setDefaults(&cfg)
	if err := validate(cfg); err != nil {
		return nil, err
	}
	cons, err := createTopology(ctx, js, cfg)
	if err != nil {
		return nil, err
	}
	b := &broker{js: js, cons: cons, cfg: cfg}
	q, err := brokerq.New[jetstream.Msg](b, ledger, brokerq.Config{
		MaxDelay: cfg.MaxRedeliveryDelay, SkipDelay: cfg.SkipDelay, ParkDelay: cfg.ParkDelay,
		ErrorDelay: min(time.Second, cfg.MaxRedeliveryDelay), Logger: cfg.Logger,
	})
	if err != nil {
		return nil, err
	}
	return &Queue{Queue: q, b: b}, nil
}

// createTopology creates or updates the streams and the consumer.
func createTopology(ctx context.Context, js jetstream.JetStream, cfg Config) (jetstream.Consumer, error) {
	_, err := js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{
		Name: cfg.Stream, Subjects: []string{cfg.Subject},
		Retention: jetstream.WorkQueuePolicy, Storage: jetstream.FileStorage,
		MaxAge: cfg.MaxAge, Replicas: cfg.Replicas,
		Description: "hookrelay delivery envelopes",
	})
	if err != nil {
		return nil, fmt.Errorf("hooknats: create stream %s: %w", cfg.Stream, err)
	}
	_, err = js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{
		Name: cfg.DeadLetterStream, Subjects: []string{cfg.DeadLetterSubject},
		Retention: jetstream.LimitsPolicy, Storage: jetstream.FileStorage,
		MaxAge: cfg.DeadLetterMaxAge, Replicas: cfg.Replicas,
		Description: "hookrelay dead-lettered deliveries",
	})
	if err != nil {
		return nil, fmt.Errorf("hooknats: create stream %s: %w", cfg.DeadLetterStream, err)
	}
	cons, err := js.CreateOrUpdateConsumer(ctx, cfg.Stream, jetstream.ConsumerConfig{
		Durable:       cfg.Consumer,
		Description:   "hookrelay workers",
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       cfg.AckWait,
		FilterSubject: cfg.Subject,
		// The ledger counts attempts; the broker must never give up on a
		// message on its own (a not-due or skipped message is redelivered
		// many times without an attempt).
		MaxDeliver: -1,
		// Delayed messages count as pending acknowledgements until they
		// are redelivered; the worker's Concurrency bounds work in flight.
		MaxAckPending: -1,
	})
	if err != nil {
		return nil, fmt.Errorf("hooknats: create consumer %s: %w", cfg.Consumer, err)
	}
	return cons, nil
}

func setDefaults(cfg *Config) {
	str := func(v *string, d string) {
		if *v == "" {
			*v = d
		}
	}
	dur := func(v *time.Duration, d time.Duration) {
		if *v == 0 {
			*v = d
		}
	}
	str(&cfg.Stream, "HOOKRELAY")
	str(&cfg.Subject, "hookrelay.deliveries")
	str(&cfg.DeadLetterStream, cfg.Stream+"_DEAD")
	str(&cfg.DeadLetterSubject, cfg.Subject+".dead")
	str(&cfg.Consumer, "hookrelay-worker")
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	dur(&cfg.AckWait, 5*time.Minute)
	dur(&cfg.MaxRedeliveryDelay, time.Minute)
	dur(&cfg.SkipDelay, time.Second)
	dur(&cfg.ParkDelay, time.Hour)
	if cfg.Replicas == 0 {
		cfg.Replicas = 1
	}
}

func validate(cfg Config) error {
	bad := func(field, problem string) error {
		return &hookrelay.ValidationError{Err: hookrelay.ErrInvalidConfig, Field: "hooknats.Config." + field, Problem: problem}
	}
	switch {
	case cfg.AckWait < 0:
		return bad("AckWait", "must not be negative")
	case cfg.MaxAge < 0:
		return bad("MaxAge", "must not be negative")
	case cfg.DeadLetterMaxAge < 0:
		return bad("DeadLetterMaxAge", "must not be negative")
	case cfg.MaxRedeliveryDelay < 0:
		return bad("MaxRedeliveryDelay", "must not be negative")
	case cfg.SkipDelay < 0:
		return bad("SkipDelay", "must not be negative")
	case cfg.ParkDelay < 0:
		return bad("ParkDelay", "must not be negative")
	case cfg.Replicas < 0:
		return bad("Replicas", "must not be negative")
	case cfg.Subject == cfg.DeadLetterSubject || cfg.Stream == cfg.DeadLetterStream:
		return bad("DeadLetterSubject", "must differ from the work stream and subject")
	}
	return nil
}

// Claim implements hookrelay.Queue. A LeaseFor at or above the consumer's
// AckWait is refused: the server would hand the message to another worker
// while the lease is still live.
func (q *Queue) Claim(ctx context.Context, p hookrelay.ClaimParams) ([]hookrelay.Claim, error) {
	if p.LeaseFor >= q.b.cfg.AckWait {
		return nil, &hookrelay.ValidationError{Err: hookrelay.ErrInvalidConfig, Field: "LeaseFor",
			Problem: fmt.Sprintf("%s must be below the consumer's AckWait %s", p.LeaseFor, q.b.cfg.AckWait)}
	}
	return q.Queue.Claim(ctx, p)
}

// broker implements brokerq.Broker on JetStream.
type broker struct {
	js  jetstream.JetStream
	cfg Config

	mu      sync.Mutex
	cons    jetstream.Consumer
	checked time.Time // when an empty fetch last asked whether the consumer exists
	// recreating is held while the topology is created again, so that
	// the claims that found the consumer gone together create it once.
	recreating sync.Mutex
}

// consumerCheckEvery is how often an empty fetch asks the server whether
// the consumer still exists. A fetch from a deleted consumer returns
// nothing and no error, so without asking, a worker whose consumer or
// stream an operator deleted would claim nothing, silently, until it was
// restarted.
const consumerCheckEvery = 2 * time.Second

// consumer returns the consumer to fetch from.
func (b *broker) consumer() jetstream.Consumer {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.cons
}

// recreateIfGone asks the server, at most every consumerCheckEvery,
// whether cons still exists, and creates the topology again (as New does)
// when its stream or itself was deleted.
func (b *broker) recreateIfGone(ctx context.Context, cons jetstream.Consumer) error {
	b.mu.Lock()
	if time.Since(b.checked) < consumerCheckEvery {
		b.mu.Unlock()
		return nil
	}
	b.checked = time.Now()
	b.mu.Unlock()
	_, err := cons.Info(ctx)
	if !errors.Is(err, jetstream.ErrConsumerNotFound) && !errors.Is(err, jetstream.ErrStreamNotFound) {
		return nil // there, or the server cannot say now: the next fetch tells
	}
	return b.recreate(ctx, cons, err)
}

// recreate creates the topology again, as New does, because the server
// said (why) that cons or its stream is gone; unless another call did
// since cons was found gone.
func (b *broker) recreate(ctx context.Context, cons jetstream.Consumer, why error) error {
	b.recreating.Lock()
	defer b.recreating.Unlock()
	if b.consumer() != cons {
		return nil
	}
	b.cfg.Logger.WarnContext(ctx, "hooknats: the consumer is gone; creating the streams and the consumer again",
		"stream", b.cfg.Stream, "consumer", b.cfg.Consumer, "error", why.Error())
	fresh, err := createTopology(ctx, b.js, b.cfg)
	if err != nil {
		return err
	}
	b.mu.Lock()
	b.cons = fresh
	b.checked = time.Now()
	b.mu.Unlock()
	return nil
}

// Publish sends every envelope, then waits for every server
// acknowledgement, so a batch costs one round trip rather than one per
// delivery. A delivery that cannot be published (its envelope over the
// server's max_payload) does not keep the others from being published;
// the error names each one that failed. When no stream answers (an
// operator deleted it), the streams and the consumer are created again,
// as New does, and those envelopes published once more.
func (b *broker) Publish(ctx context.Context, ds []hookrelay.Delivery) error {
	cons := b.consumer()
	errs := b.publishAll(ctx, ds)
	var again []int
	for i, err := range errs {
		if errors.Is(err, jetstream.ErrNoStreamResponse) {
			again = append(again, i)
		}
	}
	if len(again) > 0 {
		if err := b.recreate(ctx, cons, jetstream.ErrNoStreamResponse); err != nil {
			for _, i := range again {
				errs[i] = errors.Join(errs[i], err)
			}
		} else {
			retry := make([]hookrelay.Delivery, len(again))
			for j, i := range again {
				retry[j] = ds[i]
			}
			for j, err := range b.publishAll(ctx, retry) {
				errs[again[j]] = err
			}
		}
	}
	var out []error
	for i, err := range errs {
		if err != nil {
			out = append(out, &hookrelay.OpError{Op: "queue.enqueue", DeliveryID: ds[i].ID, Err: translate(err)})
		}
	}
	return errors.Join(out...)
}

// publishAll publishes ds and returns the client's error for each, nil
// for those the server acknowledged. When ctx ends, the deliveries not
// acknowledged yet fail with its error.
func (b *broker) publishAll(ctx context.Context, ds []hookrelay.Delivery) []error {
	acks := make([]jetstream.PubAckFuture, len(ds))
	errs := make([]error, len(ds))
	for i, d := range ds {
		body, err := hookrelay.MarshalEnvelope(d)
		if err != nil {
			errs[i] = err
			continue
		}
		m := nats.NewMsg(b.cfg.Subject)
		m.Data = body
		m.Header.Set(HeaderDeliveryID, escapeID(d.ID))
		// The message ID makes the server drop a publish repeated within its
		// duplicate window (a retried publish whose acknowledgement was
		// lost); a later enqueue of the same delivery (a redrive) differs.
		m.Header.Set(jetstream.MsgIDHeader, escapeID(d.ID)+"/"+strconv.Itoa(d.Attempt)+"/"+strconv.FormatInt(d.NextAttemptAt.UnixNano(), 10))
		acks[i], errs[i] = b.js.PublishMsgAsync(m)
	}
	for i, f := range acks {
		if f == nil || errs[i] != nil {
			continue
		}
		select {
		case <-f.Ok():
		case errs[i] = <-f.Err():
		case <-ctx.Done():
			for j := i; j < len(acks); j++ {
				if acks[j] != nil && errs[j] == nil {
					errs[j] = ctx.Err()
				}
			}
			return errs
		}
	}
	return errs
}

// Fetch asks the server for what it holds now: after the server's publish
// acknowledgement a message is fetchable, so there is nothing to wait for.
func (b *broker) Fetch(ctx context.Context, n int, _ time.Duration) ([]jetstream.Msg, error) {
	cons := b.consumer()
	batch, err := cons.FetchNoWait(n)
	if err != nil {
		return nil, translate(errors.Join(err, b.recreateIfGone(ctx, cons)))
	}
	var out []jetstream.Msg
	for m := range batch.Messages() {
		out = append(out, m)
	}
	switch err := batch.Error(); {
	case errors.Is(err, jetstream.ErrConsumerDeleted):
		// Newer servers say so where older ones hand out nothing.
		return out, translate(b.recreate(ctx, cons, err))
	case err != nil && !errors.Is(err, jetstream.ErrNoMessages):
		return out, translate(err)
	}
	if len(out) == 0 {
		return nil, translate(b.recreateIfGone(ctx, cons))
	}
	return out, nil
}

func (b *broker) Body(m jetstream.Msg) []byte { return m.Data() }

// Stale is always false: a JetStream acknowledgement names the message by
// stream and consumer sequence, so it stays valid after the client
// reconnects; one that arrives after the message was redelivered elsewhere
// is absorbed by the ledger.
func (b *broker) Stale(jetstream.Msg) bool { return false }

func (b *broker) Ack(ctx context.Context, m jetstream.Msg) error {
	// DoubleAck waits for the server to confirm, so a caller that returns
	// nil knows the message will not come back.
	return translate(m.DoubleAck(ctx))
}

func (b *broker) Redeliver(_ context.Context, m jetstream.Msg, delay time.Duration, _ *hookrelay.Delivery) error {
	if delay <= 0 {
		return translate(m.Nak())
	}
	return translate(m.NakWithDelay(delay))
}

func (b *broker) DeadLetter(ctx context.Context, m jetstream.Msg, d *hookrelay.Delivery, reason string) error {
	dm := nats.NewMsg(b.cfg.DeadLetterSubject)
	dm.Data = m.Data()
	if d != nil {
		body, err := hookrelay.MarshalEnvelope(*d)
		if err != nil {
			return err
		}
		dm.Data = body
		dm.Header.Set(HeaderDeliveryID, escapeID(d.ID))
		dm.Header.Set(jetstream.MsgIDHeader, "dead/"+escapeID(d.ID)+"/"+strconv.Itoa(d.Attempt))
	}
	dm.Header.Set(HeaderDeadLetterReason, reason)
	cons := b.consumer()
	_, err := b.js.PublishMsg(ctx, dm)
	if errors.Is(err, jetstream.ErrNoStreamResponse) {
		// The dead-letter stream was deleted: create it again, as New does.
		if err = b.recreate(ctx, cons, err); err == nil {
			_, err = b.js.PublishMsg(ctx, dm)
		}
	}
	if err != nil {
		return translate(err)
	}
	return translate(m.DoubleAck(ctx))
}

// escapeID is a delivery ID as it goes into a header (HeaderDeliveryID,
// and the message ID): escaped, so that it reads back as itself and no two
// IDs give the same message ID. The server trims the blanks around a
// header value and line breaks become spaces, so " whd_1" or "whd\n1" sent
// raw would read as "whd_1" or "whd 1", and its message would be taken for
// a repeat of theirs and dropped as a duplicate.
func escapeID(id string) string { return url.QueryEscape(id) }

// translate keeps client error types out of the public API: the message
// survives, the type does not.
func translate(err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("hooknats: %s", err.Error())
}
