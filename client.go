package hookrelay

import (
	"cmp"
	"context"
	crand "crypto/rand"
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/google/uuid"
)

// Defaults of Config's zero fields.
const (
	DefaultConcurrency               = 16
	DefaultPerDestinationConcurrency = 4 // the least; see Config.PerDestinationConcurrency
	DefaultPollInterval              = time.Second
	DefaultLeaseFor                  = 2 * time.Minute
	DefaultPausedRecheck             = 5 * time.Second
	DefaultDestinationCacheTTL       = time.Second
	DefaultCircuitCoolDown           = 30 * time.Second
	DefaultMaxPayloadBytes           = 1 << 20 // 1 MiB
	DefaultRecoverUnpublishedAfter   = 5 * time.Minute
)

// Config configures a Client. Zero fields take the documented defaults;
// invalid values make New return a *ValidationError naming the field.
type Config struct {
	// Queue, Ledger and Destinations are required. With the memory and SQL
	// adapters, Queue and Ledger are the same store.
	Queue        Queue
	Ledger       Ledger
	Destinations Destinations
	// Sender is required to run the worker (Start, Process); a client that
	// only enqueues may leave it nil.
	Sender Sender
	// Policy is the retry policy for new deliveries whose destination has no
	// override. Defaults to DefaultPolicy().
	Policy *Policy
	// Policies lists older policy versions that stored records may still
	// name, so a replay uses the policy its record names.
	Policies []Policy
	// Clock is the only source of time. Defaults to the wall clock.
	Clock clock.Clock
	// Random is the jitter source. Defaults to a PCG generator seeded from
	// crypto/rand.
	Random Random
	// Concurrency caps sends in flight in this worker. Defaults to
	// DefaultConcurrency. With
	// a BatchLedger (the memory and SQL stores), an attempt gives its slot
	// back once its ledger write is queued for the next batch: up to four
	// times Concurrency finished attempts wait for their batch (one batch
	// takes that many writes) while another commits.
	Concurrency int
	// PerDestinationConcurrency caps attempts in flight to one destination
	// in this worker, unless the destination sets MaxConcurrency, so a slow
	// destination cannot take the whole pool. Defaults to a quarter of
	// Concurrency, at least DefaultPerDestinationConcurrency (so 4 with the
	// default Concurrency of 16, 12 with 50): a slow or failing destination
	// holds at most a quarter of the worker's slots, and a few busy
	// destinations can still use all of them.
	PerDestinationConcurrency int
	// BatchSize caps deliveries claimed per poll, times the worker's
	// claim-ahead factor (8): the worker holds claims for the slots about
	// to free. Defaults to Concurrency. A claim takes at most each
	// destination's room (eight times its limit, less its attempts in
	// flight and held claims); a queue that cannot claim by room
	// (ClaimsByDestinationRoom, such as a broker) gets claims sized by how
	// its order mixed destinations last time, so that it seldom claims
	// deliveries to one destination only to hand them back.
	BatchSize int
	// PollInterval is how often the worker looks for due work when it was
	// not woken. Defaults to DefaultPollInterval.
	PollInterval time.Duration
	// LeaseFor is how long a claim is held; it must exceed the longest send
	// timeout. Sends are cancelled when the lease runs out. Defaults to
	// DefaultLeaseFor.
	LeaseFor time.Duration
	// PausedRecheck is how long a paused or disabled destination is skipped
	// before the worker looks at it again, and the longest a destination
	// waiting for a slow rate limit (MaxPerSecond) is, so that a rate
	// raised or removed takes effect within it. It is also how often a
	// worker looks again at the stored guard of the destinations a hold or
	// an open circuit makes it skip, and the longest a delivery it hands
	// back for one waits to be due again, so that a guard another process
	// cleared (ClearDestinationGuard) takes effect within it. Defaults to
	// DefaultPausedRecheck.
	PausedRecheck time.Duration
	// DestinationCacheTTL is how long the worker reuses what Destinations
	// returned for a destination before reading it again (Process called
	// directly always reads it). A change made through this client (pause,
	// resume, a 410 disabling it, a redrive of its deliveries) is seen at
	// once; a change written to the store directly (Put) or by another
	// process within the TTL. Claims on the SQL store skip paused and
	// disabled destinations whatever the cache holds. Defaults to
	// DefaultDestinationCacheTTL;
	// negative turns the cache off.
	DestinationCacheTTL time.Duration
	// DefaultMaxPerSecond caps sends per second to every destination that
	// sets no MaxPerSecond of its own, across every worker sharing the
	// store (see Destination.MaxPerSecond). Defaults to 0: no limit.
	DefaultMaxPerSecond float64
	// CircuitFailureThreshold opens a destination's circuit breaker after
	// this many attempts to it failed in a row (retryable results: refused
	// connections, timeouts, 5xx): its deliveries then wait, without
	// spending attempts, for CircuitCoolDown; then one probe delivery is
	// sent, and its success closes the circuit (a failure re-opens it).
	// The state is kept in the store and shared by every worker. Defaults
	// to 0: no circuit breaker.
	CircuitFailureThreshold int
	// CircuitCoolDown is how long an open circuit waits before its probe.
	// Defaults to DefaultCircuitCoolDown.
	CircuitCoolDown time.Duration
	// DisableAfterFailingFor disables a destination whose attempts have
	// all failed (retryable results) for this long, with the reason
	// destination_failing, as a 410 disables it: its deliveries wait,
	// without spending attempts, until a human re-enables it. Defaults to
	// 0: never.
	DisableAfterFailingFor time.Duration
	// CompletionLinger is how long the worker holds a batch of ledger
	// writes open for more after the first one arrives, when the Ledger is
	// a BatchLedger. Defaults to 0: a batch is flushed as soon as the
	// previous one committed, with every write that arrived meanwhile,
	// which under load gives large batches without delaying a lone write.
	CompletionLinger time.Duration
	// MaxPayloadBytes refuses larger payloads at enqueue. Defaults to
	// DefaultMaxPayloadBytes.
	MaxPayloadBytes int
	// Holder names this worker in leases. Defaults to a random UUID.
	Holder string
	// Observer is called at every transition. Defaults to a no-op.
	Observer Observer
	// Retention, when set, makes the worker apply it to the Ledger's
	// history — remove old delivered (and, if allowed, dead) records and
	// compact old attempt details — every Retention.Interval, in batches of
	// Retention.BatchSize, through the Ledger's HistoryCleaner ability (New
	// refuses a Ledger without it). Safe with several workers on one store.
	// Defaults to nil: all history is kept.
	Retention *RetentionPolicy
	// RecoverUnpublishedAfter is the grace period of broker outbox
	// recovery. With a Queue that is not the Ledger's own store (a message
	// broker) and a Ledger with the UnpublishedRecovery ability (memory,
	// SQL), the worker looks every PollInterval for pending deliveries due
	// and not leased for this long — their message was presumably lost
	// between the ledger's create and the publish — and publishes them
	// again, at most BatchSize a pass. It must exceed the longest time a
	// due message waits in the broker unleased (its redelivery delays, the
	// skip delay of a destination at its concurrency limit): a shorter one
	// costs surplus messages, which the lease makes harmless, never a
	// second send. Deliveries to destinations this worker knows are paused
	// or disabled are left alone. Defaults to
	// DefaultRecoverUnpublishedAfter; negative turns recovery
	// off.
	RecoverUnpublishedAfter time.Duration
	// Authorizer decides who may redrive which dead-lettered deliveries.
	// Defaults to SingleTenantOnly: a selection spanning several tenants is
	// refused.
	Authorizer Authorizer
}

// Client enqueues deliveries and, once started, runs a worker that claims due
// deliveries and processes them. It is safe for concurrent use.
type Client struct {
	queue        Queue
	ledger       Ledger
	destinations Destinations
	sender       Sender
	policy       Policy
	policies     map[string]Policy
	clock        clock.Clock
	observer     Observer
	cfg          Config
	// ledgerQueue: Queue and Ledger are one LedgerQueue, so queue
	// transitions after ledger writes are already done.
	ledgerQueue bool
	// roomClaims: the Queue honours per-destination rooms in a claim.
	roomClaims bool
	// batchLedger is the Ledger's BatchLedger ability, nil without it.
	batchLedger BatchLedger
	// timedSender is the Sender's SendTimeouter ability when the client
	// runs on the wall clock (the one a sender's timeout is kept by), nil
	// otherwise: see sendContext.
	timedSender SendTimeouter
	// dueNotifier is the Queue's DueNotifier ability, nil without it.
	dueNotifier DueNotifier
	// maxEnvelope is the Queue's MessageLimit, 0 without it.
	maxEnvelope int
	// cleaner is the Ledger's HistoryCleaner when Config.Retention is set.
	cleaner HistoryCleaner
	// guard keeps destinations' protection state: the Destinations port's
	// DestinationGuard, or one kept in this process.
	guard DestinationGuard
	// recovery is the Ledger's UnpublishedRecovery when the worker
	// republishes lost broker messages, nil otherwise.
	recovery UnpublishedRecovery

	randMu sync.Mutex
	random Random

	worker worker
}

// New validates cfg, applies defaults and returns a client. It starts
// nothing.
func New(cfg Config) (*Client, error) {
	switch {
	case cfg.Queue == nil:
		return nil, invalid(ErrInvalidConfig, "Queue", "is required")
	case cfg.Ledger == nil:
		return nil, invalid(ErrInvalidConfig, "Ledger", "is required")
	case cfg.Destinations == nil:
		return nil, invalid(ErrInvalidConfig, "Destinations", "is required")
	case cfg.Concurrency < 0:
		return nil, invalid(ErrInvalidConfig, "Concurrency", "must not be negative")
	case cfg.PerDestinationConcurrency < 0:
		return nil, invalid(ErrInvalidConfig, "PerDestinationConcurrency", "must not be negative")
	case cfg.BatchSize < 0:
		return nil, invalid(ErrInvalidConfig, "BatchSize", "must not be negative")
	case cfg.PollInterval < 0:
		return nil, invalid(ErrInvalidConfig, "PollInterval", "must not be negative")
	case cfg.LeaseFor < 0:
		return nil, invalid(ErrInvalidConfig, "LeaseFor", "must not be negative")
	case cfg.PausedRecheck < 0:
		return nil, invalid(ErrInvalidConfig, "PausedRecheck", "must not be negative")
	case cfg.CompletionLinger < 0:
		return nil, invalid(ErrInvalidConfig, "CompletionLinger", "must not be negative")
	case cfg.MaxPayloadBytes < 0:
		return nil, invalid(ErrInvalidConfig, "MaxPayloadBytes", "must not be negative")
	case !validRate(cfg.DefaultMaxPerSecond):
		return nil, invalid(ErrInvalidConfig, "DefaultMaxPerSecond", fmt.Sprintf("is %v; it must be zero (no limit) or a finite positive rate", cfg.DefaultMaxPerSecond))
	case cfg.CircuitFailureThreshold < 0:
		return nil, invalid(ErrInvalidConfig, "CircuitFailureThreshold", "must not be negative")
	case cfg.CircuitCoolDown < 0:
		return nil, invalid(ErrInvalidConfig, "CircuitCoolDown", "must not be negative")
	case cfg.DisableAfterFailingFor < 0:
		return nil, invalid(ErrInvalidConfig, "DisableAfterFailingFor", "must not be negative")
	}
	if cfg.Retention != nil {
		if err := cfg.Retention.Validate(); err != nil {
			return nil, err
		}
		r := cfg.Retention.withDefaults()
		cfg.Retention = &r
	}
	c := &Client{
		queue: cfg.Queue, ledger: cfg.Ledger, destinations: cfg.Destinations,
		sender: cfg.Sender, clock: cfg.Clock, random: cfg.Random, observer: cfg.Observer,
		policies: map[string]Policy{},
	}
	if cfg.Policy == nil {
		c.policy = DefaultPolicy()
	} else {
		c.policy = *cfg.Policy
	}
	if err := c.policy.Validate(); err != nil {
		return nil, fmt.Errorf("Config.Policy: %w", err)
	}
	for i, p := range cfg.Policies {
		if err := p.Validate(); err != nil {
			return nil, fmt.Errorf("Config.Policies[%d]: %w", i, err)
		}
		c.policies[p.Version] = p
	}
	c.policies[c.policy.Version] = c.policy
	c.ledgerQueue = sameLedgerQueue(cfg.Queue, cfg.Ledger)
	_, c.roomClaims = As[ClaimsByDestinationRoom](cfg.Queue)
	c.dueNotifier, _ = As[DueNotifier](cfg.Queue)
	if ml, ok := As[MessageLimit](cfg.Queue); ok {
		c.maxEnvelope = ml.MaxEnvelopeBytes()
	}
	var ok bool
	if c.guard, ok = As[DestinationGuard](cfg.Destinations); !ok {
		c.guard = &GuardMap{}
	}
	if cfg.Retention != nil {
		var ok bool
		if c.cleaner, ok = As[HistoryCleaner](cfg.Ledger); !ok {
			return nil, invalid(ErrInvalidConfig, "Retention", fmt.Sprintf("is set but the Ledger (%T) has no HistoryCleaner ability", cfg.Ledger))
		}
	}
	if !c.ledgerQueue && cfg.RecoverUnpublishedAfter >= 0 {
		c.recovery, _ = As[UnpublishedRecovery](cfg.Ledger)
	}
	// Not through Unwrap: a batch replaces the ledger's write methods, so a
	// wrapper that intercepts them (metrics, fault injection) would be
	// bypassed. A wrapper batches only if it implements BatchLedger itself.
	c.batchLedger, _ = cfg.Ledger.(BatchLedger)
	if c.clock == nil {
		c.clock = clock.New()
		c.timedSender, _ = cfg.Sender.(SendTimeouter)
	}
	if c.random == nil {
		var seed [16]byte
		_, _ = crand.Read(seed[:]) // crypto/rand.Read never fails on supported platforms
		c.random = rand.New(rand.NewPCG(binary.LittleEndian.Uint64(seed[:8]), binary.LittleEndian.Uint64(seed[8:])))
	}
	if c.observer == nil {
		c.observer = nopObserver{}
	}
	cfg.Concurrency = cmp.Or(cfg.Concurrency, DefaultConcurrency)
	cfg.PerDestinationConcurrency = cmp.Or(cfg.PerDestinationConcurrency, max(DefaultPerDestinationConcurrency, cfg.Concurrency/4))
	cfg.BatchSize = cmp.Or(cfg.BatchSize, cfg.Concurrency)
	cfg.MaxPayloadBytes = cmp.Or(cfg.MaxPayloadBytes, DefaultMaxPayloadBytes)
	cfg.PollInterval = cmp.Or(cfg.PollInterval, DefaultPollInterval)
	cfg.LeaseFor = cmp.Or(cfg.LeaseFor, DefaultLeaseFor)
	cfg.PausedRecheck = cmp.Or(cfg.PausedRecheck, DefaultPausedRecheck)
	cfg.DestinationCacheTTL = cmp.Or(cfg.DestinationCacheTTL, DefaultDestinationCacheTTL)
	cfg.RecoverUnpublishedAfter = cmp.Or(cfg.RecoverUnpublishedAfter, DefaultRecoverUnpublishedAfter)
	cfg.CircuitCoolDown = cmp.Or(cfg.CircuitCoolDown, DefaultCircuitCoolDown)
	if cfg.Holder == "" {
		cfg.Holder = uuid.NewString()
	}
	c.cfg = cfg
	c.worker.init()
	c.worker.perDestDefault = cfg.PerDestinationConcurrency
	return c, nil
}

// Clock returns the client's clock.
func (c *Client) Clock() clock.Clock { return c.clock }

func (c *Client) randomFloat() float64 {
	c.randMu.Lock()
	defer c.randMu.Unlock()
	return c.random.Float64()
}

// EnqueueParams describe one event for one destination. Its IDs, event
// type and Scope labels must be valid UTF-8, and the IDs and event type
// hold no NUL byte: what every store can keep exactly. They are taken
// byte for byte, never trimmed or normalised: " evt_1" and "evt_1" are two
// events.
type EnqueueParams struct {
	// EventID is the immutable business event ID (required, at most 255
	// bytes). With DestinationID it determines the delivery ID.
	EventID string
	// TenantID owns the delivery (required, at most 255 bytes). If the
	// destination names a tenant, they must match.
	TenantID string
	// DestinationID must name a known destination (at most 255 bytes).
	DestinationID string
	// EventType, e.g. "lease.payment_recorded" (required, at most 255 bytes).
	EventType string
	// Scope holds free-form labels (property, lease, shipment…).
	Scope map[string]string
	// Payload is sent unchanged on every attempt; at most MaxPayloadBytes.
	Payload []byte
	// EnvelopeVersion defaults to the current EnvelopeVersion; a version
	// newer than this library knows is refused.
	EnvelopeVersion int
}

// EnqueueResult reports the delivery ID, its destination, and whether a
// new record was made (false: the same event was already enqueued for this
// destination).
type EnqueueResult struct {
	ID            string
	DestinationID string
	Created       bool
}

// Prepare validates params and builds the pending delivery records that
// Enqueue would store, without storing them. Adapters with transactional
// enqueue (the SQL adapter's EnqueueTx) store what Prepare returns. Errors
// name the offending field and the position in params. When params name
// more than one destination and the Destinations port is a
// DestinationBatchReader, the destinations are read in one call.
func (c *Client) Prepare(ctx context.Context, params []EnqueueParams) ([]Delivery, error) {
	return c.prepare(ctx, params, c.destinationsOf(params))
}

// destinationsOf returns how Prepare looks params' destinations up: all of
// them read together when there are several and the port can
// (DestinationBatchReader), else one Destination call each. The batch is
// read at the first lookup, so an event refused before it is refused
// without a read, as with single reads. A destination the batch did not
// return is asked for alone, so that a missing one is reported by the port
// exactly as before, at the first event naming it.
func (c *Client) destinationsOf(params []EnqueueParams) func(context.Context, string) (Destination, error) {
	single := c.destinations.Destination
	if len(params) < 2 { // a single Enqueue: no ability lookup
		return single
	}
	reader, ok := As[DestinationBatchReader](c.destinations)
	if !ok {
		return single
	}
	seen := make(map[string]bool, len(params))
	var ids []string
	for _, p := range params {
		// An ID prepare will refuse is not read.
		if id := p.DestinationID; id != "" && len(id) <= 255 && unstorableText(id) == "" && !seen[id] {
			seen[id] = true
			ids = append(ids, id)
		}
	}
	if len(ids) < 2 {
		return single
	}
	var byID map[string]Destination // nil until the batch is read
	return func(ctx context.Context, id string) (Destination, error) {
		if byID == nil {
			found, err := reader.DestinationsByID(ctx, ids)
			if err != nil {
				return Destination{}, fmt.Errorf("read %d destinations: %w", len(ids), err)
			}
			byID = make(map[string]Destination, len(found))
			for _, d := range found {
				if seen[d.ID] { // what was asked for only
					byID[d.ID] = d
				}
			}
		}
		if d, ok := byID[id]; ok {
			return d, nil
		}
		return single(ctx, id)
	}
}

// prepare is Prepare with destinations looked up by resolve.
func (c *Client) prepare(ctx context.Context, params []EnqueueParams, resolve func(context.Context, string) (Destination, error)) ([]Delivery, error) {
	now := c.clock.Now()
	out := make([]Delivery, 0, len(params))
	dests := map[string]Destination{}
	for i, p := range params {
		var err error
		switch {
		case p.EventID == "":
			err = invalid(ErrInvalidDelivery, "EventID", "must not be empty")
		case len(p.EventID) > 255:
			err = invalid(ErrInvalidDelivery, "EventID", "must be at most 255 bytes")
		case p.TenantID == "":
			err = invalid(ErrInvalidDelivery, "TenantID", "must not be empty")
		case len(p.TenantID) > 255:
			err = invalid(ErrInvalidDelivery, "TenantID", "must be at most 255 bytes")
		case p.DestinationID == "":
			err = invalid(ErrInvalidDelivery, "DestinationID", "must not be empty")
		case len(p.DestinationID) > 255:
			err = invalid(ErrInvalidDelivery, "DestinationID", "must be at most 255 bytes")
		case p.EventType == "":
			err = invalid(ErrInvalidDelivery, "EventType", "must not be empty")
		case len(p.EventType) > 255:
			err = invalid(ErrInvalidDelivery, "EventType", "must be at most 255 bytes")
		case unstorableText(p.EventID) != "":
			err = invalid(ErrInvalidDelivery, "EventID", unstorableText(p.EventID))
		case unstorableText(p.TenantID) != "":
			err = invalid(ErrInvalidDelivery, "TenantID", unstorableText(p.TenantID))
		case unstorableText(p.DestinationID) != "":
			err = invalid(ErrInvalidDelivery, "DestinationID", unstorableText(p.DestinationID))
		case unstorableText(p.EventType) != "":
			err = invalid(ErrInvalidDelivery, "EventType", unstorableText(p.EventType))
		case len(p.Payload) > c.cfg.MaxPayloadBytes:
			err = invalid(ErrInvalidDelivery, "Payload", fmt.Sprintf("is %d bytes, over the %d-byte limit", len(p.Payload), c.cfg.MaxPayloadBytes))
		case p.EnvelopeVersion < 0 || p.EnvelopeVersion > EnvelopeVersion:
			err = invalid(ErrInvalidDelivery, "EnvelopeVersion", fmt.Sprintf("%d is unknown (this library writes versions 1 to %d)", p.EnvelopeVersion, EnvelopeVersion))
		default:
			err = checkScope(p.Scope)
		}
		if err != nil {
			return nil, fmt.Errorf("enqueue params[%d] (event %s): %w", i, quote(p.EventID), err)
		}
		dest, ok := dests[p.DestinationID]
		if !ok {
			dest, err = resolve(ctx, p.DestinationID)
			if err != nil {
				err = shortNotFound(err)
				return nil, fmt.Errorf("enqueue params[%d] (event %s): destination %s: %w", i, quote(p.EventID), quote(p.DestinationID), err)
			}
			dests[p.DestinationID] = dest
		}
		if dest.TenantID != "" && dest.TenantID != p.TenantID {
			return nil, fmt.Errorf("enqueue params[%d] (event %s): %w", i, quote(p.EventID),
				invalid(ErrInvalidDelivery, "TenantID", fmt.Sprintf("%s does not own destination %s", quote(p.TenantID), quote(p.DestinationID))))
		}
		if err := c.checkLease(dest); err != nil {
			return nil, fmt.Errorf("enqueue params[%d]: %w", i, err)
		}
		policy := c.policy
		if dest.Policy != nil {
			if err := dest.Policy.Validate(); err != nil {
				return nil, fmt.Errorf("enqueue params[%d]: destination %s policy: %w", i, quote(p.DestinationID), err)
			}
			policy = *dest.Policy
		}
		env := p.EnvelopeVersion
		if env == 0 {
			env = EnvelopeVersion
		}
		d := Delivery{
			ID: DeliveryID(p.EventID, p.DestinationID), EventID: p.EventID, TenantID: p.TenantID,
			Scope: p.Scope, DestinationID: p.DestinationID, EventType: p.EventType,
			Payload: p.Payload, EnvelopeVersion: env, Attempt: 1,
			FirstQueuedAt: now, NextAttemptAt: now, PolicyVersion: policy.Version,
			State: StatePending, UpdatedAt: now,
		}
		if err := c.checkEnvelope(d); err != nil {
			return nil, fmt.Errorf("enqueue params[%d] (event %s): %w", i, quote(p.EventID), err)
		}
		out = append(out, d)
	}
	return out, nil
}

// checkEnvelope refuses a delivery whose envelope the Queue's MessageLimit
// cannot carry. The envelope is only encoded when a bound on its size
// (the payload in base64, every other field escaped at worst six bytes a
// byte, 1 KiB of names and times) is over the limit.
func (c *Client) checkEnvelope(d Delivery) error {
	if c.maxEnvelope <= 0 {
		return nil
	}
	text := len(d.ID) + len(d.EventID) + len(d.TenantID) + len(d.DestinationID) + len(d.EventType) + len(d.PolicyVersion)
	for k, v := range d.Scope {
		text += len(k) + len(v) + 6 // quotes, colon, comma
	}
	if (len(d.Payload)+2)/3*4+6*text+1024 <= c.maxEnvelope {
		return nil
	}
	// A retry republishes the envelope with a larger attempt number and a
	// later next-attempt time, whose text can be longer (nanoseconds, an
	// offset): the check is on the largest envelope the delivery can have,
	// so one accepted now is never refused by the broker on a retry.
	largest := d
	largest.Attempt, largest.NextAttemptAt = math.MaxInt, longestEnvelopeTime
	body, err := MarshalEnvelope(largest)
	if err != nil {
		return invalid(ErrInvalidDelivery, "Payload", "cannot be encoded in an envelope: "+err.Error())
	}
	if len(body) > c.maxEnvelope {
		return invalid(ErrInvalidDelivery, "Payload", fmt.Sprintf("makes an envelope of up to %d bytes on its retries (payload %d bytes, in base64), over the %d bytes the queue's broker carries in a message",
			len(body), len(d.Payload), c.maxEnvelope))
	}
	return nil
}

// longestEnvelopeTime is a time whose text in an envelope is as long as
// any storable time's: the last one, nine digits of nanoseconds, and an
// offset in place of "Z".
var longestEnvelopeTime = maxStorableTime.In(time.FixedZone("", -(9*3600 + 30*60)))

// Enqueue validates one event, stores its delivery record and makes it
// claimable. It is idempotent by delivery ID: enqueueing the same event for
// the same destination again returns the same ID with Created false and
// changes nothing, even when the payload (or any other field) differs: the
// stored record keeps its first payload.
func (c *Client) Enqueue(ctx context.Context, params EnqueueParams) (EnqueueResult, error) {
	res, err := c.EnqueueMany(ctx, []EnqueueParams{params})
	if err != nil {
		return EnqueueResult{}, err
	}
	return res[0], nil
}

// EnqueueMany is Enqueue for several events. Validation happens before
// anything is stored: one invalid event refuses the whole call. The records
// are stored by one Ledger.Create call, all or none. Two entries naming the
// same event and destination are one delivery: the first entry's record
// is stored, and the later one gets its ID with Created false, whatever its
// payload. With a Queue that is not the Ledger (a broker), an error from
// Queue.Enqueue (or a ctx that ended then) comes after the records were
// stored: calling again with the same params is safe (it creates nothing
// and publishes them), and otherwise the worker's outbox recovery
// publishes them (Config.RecoverUnpublishedAfter, unless turned off).
// Every delivery of the call goes to Queue.Enqueue, created now or not: a
// broker queue publishes its message again, which recovers a delivery
// whose first publish was lost after its record was stored. The Queue
// contract makes that safe: it never revives a dead delivery, resends a
// delivered one or hands out a leased one twice. When the Queue and the
// Ledger are one LedgerQueue, Ledger.Create alone makes the records
// claimable, and Queue.Enqueue is not called.
func (c *Client) EnqueueMany(ctx context.Context, params []EnqueueParams) ([]EnqueueResult, error) {
	ds, err := c.Prepare(ctx, params)
	if err != nil {
		return nil, err
	}
	return c.store(ctx, ds)
}

// store creates prepared records with one Ledger.Create call, makes them
// claimable and wakes the worker.
func (c *Client) store(ctx context.Context, ds []Delivery) ([]EnqueueResult, error) {
	created, err := c.ledger.Create(ctx, ds)
	if err != nil {
		return nil, opErr("ledger.create", "", err)
	}
	// A LedgerQueue's records are its queue entries: Create stored each
	// one (or found it stored), and its Enqueue could only check that they
	// exist — on a SQL store one more round trip per enqueue.
	if !c.ledgerQueue {
		if err := c.queue.Enqueue(ctx, ds); err != nil {
			return nil, opErr("queue.enqueue", "", err)
		}
	}
	out := make([]EnqueueResult, len(ds))
	for i, d := range ds {
		out[i] = EnqueueResult{ID: d.ID, DestinationID: d.DestinationID, Created: created[i]}
	}
	c.worker.wakeUp()
	return out, nil
}
