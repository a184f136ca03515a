package hookrelay

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
)

// PublishParams describe one event that happened for one tenant, to be
// delivered to every destination of that tenant subscribed to its type.
type PublishParams struct {
	// EventID is the immutable business event ID (required, at most 255
	// bytes). With each destination ID it determines that delivery's ID.
	EventID string
	// TenantID owns the event (required, at most 255 bytes). Only
	// destinations whose TenantID is exactly this one are reached; a
	// destination without a tenant is never published to (Enqueue it by
	// ID instead).
	TenantID string
	// EventType, e.g. "lease.payment_recorded" (required, at most 255
	// bytes), is matched against each destination's EventTypes. It is a
	// concrete type that a pattern can name: "*" is refused, and so are a
	// space, a control character, an empty segment (a leading, trailing or
	// doubled dot) and bytes that are not UTF-8.
	EventType string
	// Scope holds free-form labels (property, lease, shipment…).
	Scope map[string]string
	// Payload is sent unchanged to every destination on every attempt; at
	// most Config.MaxPayloadBytes.
	Payload []byte
}

// SkipReasonDisabled is SkippedDestination.Reason for a destination that
// is disabled (its recipient said it is gone, HTTP 410).
const SkipReasonDisabled = "destination_disabled"

// SkippedDestination is a destination subscribed to a published event that
// got no delivery, and why.
type SkippedDestination struct {
	ID string
	// Reason is a stable lower_snake_case code: SkipReasonDisabled.
	Reason string
	// Detail says more in free text, e.g. the destination's DisabledReason.
	Detail string
}

// PublishResult reports one Publish.
type PublishResult struct {
	// Deliveries has one entry per destination that got the event, in
	// destination ID order, each with its deterministic delivery ID.
	// Created is false where that delivery already existed (the event was
	// published or enqueued to that destination before): nothing was
	// changed for it.
	Deliveries []EnqueueResult
	// Skipped lists the subscribed destinations left out, in ID order.
	Skipped []SkippedDestination
}

// PreparedPublish is a fan-out built by Client.PreparePublish and not yet
// stored: the pending delivery records, one per destination that gets the
// event, and the destinations skipped.
type PreparedPublish struct {
	// Deliveries are the records to store, in destination ID order.
	Deliveries []Delivery
	Skipped    []SkippedDestination
}

// Result reports the publish once its deliveries are stored. created must
// say, per entry of Deliveries, whether a record was made (what
// Ledger.Create and the SQL adapter's EnqueueTx return); it panics when the
// lengths differ.
func (p PreparedPublish) Result(created []bool) PublishResult {
	if len(created) != len(p.Deliveries) {
		panic(fmt.Sprintf("hookrelay: PreparedPublish.Result: %d created flags for %d deliveries", len(created), len(p.Deliveries)))
	}
	out := PublishResult{Deliveries: make([]EnqueueResult, len(p.Deliveries)), Skipped: p.Skipped}
	for i, d := range p.Deliveries {
		out.Deliveries[i] = EnqueueResult{ID: d.ID, DestinationID: d.DestinationID, Created: created[i]}
	}
	return out
}

// Publish enqueues one event for every destination of params.TenantID whose
// EventTypes match params.EventType, in one atomic step: the records are
// stored by a single Ledger.Create call, which stores all or none (the
// memory and SQL ledgers use one transaction). Each delivery has the usual
// ID, DeliveryID(EventID, destination ID), so publishing the same event
// again creates nothing (every result Created false) except for a
// destination subscribed since, which gets its delivery; an error is safe
// to retry the same way. Paused destinations get their delivery, which
// waits until they are resumed; disabled ones get nothing and are listed in
// Skipped. No subscribed destination is not an error: the result is empty.
//
// Concurrent publishes of one event create each delivery once (one of them
// stores the whole fan-out) and report the same IDs to every caller. An
// event published again after its deliveries were delivered or
// dead-lettered creates nothing and sends nothing; after retention removed
// a record (RetentionPolicy), the same delivery ID is created anew and sent
// again. The fan-out follows the destinations as one DestinationsFor read
// found them just before the store: a destination paused, disabled,
// unsubscribed or removed after that read still gets its delivery, which is
// then held or dead-lettered like any delivery stored before the change.
//
// Publish needs Destinations to be a DestinationFinder and returns an error
// wrapping ErrUnsupported otherwise. Invalid params are refused with a
// *ValidationError (ErrInvalidDelivery) naming the field, before anything
// is stored.
func (c *Client) Publish(ctx context.Context, params PublishParams) (PublishResult, error) {
	pp, err := c.PreparePublish(ctx, params)
	if err != nil {
		return PublishResult{}, err
	}
	if len(pp.Deliveries) == 0 {
		return pp.Result(nil), nil
	}
	res, err := c.store(ctx, pp.Deliveries)
	if err != nil {
		return PublishResult{}, fmt.Errorf("hookrelay: publish (event %s): %w", quotePrefix(params.EventID), err)
	}
	return PublishResult{Deliveries: res, Skipped: pp.Skipped}, nil
}

// PreparePublish validates params, finds the subscribed destinations and
// builds the pending delivery records Publish would store, without storing
// them. Adapters with transactional enqueue (the SQL adapter's PublishTx)
// store what it returns in the caller's transaction. Errors are those of
// Publish.
func (c *Client) PreparePublish(ctx context.Context, params PublishParams) (PreparedPublish, error) {
	lister, ok := As[DestinationFinder](c.destinations)
	if !ok {
		return PreparedPublish{}, fmt.Errorf("publish: %w (Destinations is not a DestinationFinder, which Publish needs to find subscribed destinations)", ErrUnsupported)
	}
	fail := func(err error) (PreparedPublish, error) {
		return PreparedPublish{}, fmt.Errorf("hookrelay: publish (event %s): %w", quotePrefix(params.EventID), err)
	}
	if err := c.validatePublish(ctx, params); err != nil {
		return fail(err)
	}
	dests, err := lister.DestinationsFor(ctx, DestinationsForParams{TenantID: params.TenantID, EventType: params.EventType})
	if err != nil {
		return fail(fmt.Errorf("list destinations: %w", err))
	}
	slices.SortFunc(dests, func(a, b Destination) int { return strings.Compare(a.ID, b.ID) })
	byID := make(map[string]Destination, len(dests))
	var out PreparedPublish
	eps := make([]EnqueueParams, 0, len(dests))
	for _, d := range dests {
		// A lister that returned another tenant's destination, or one not
		// subscribed, has a bug; never fan an event out to it.
		if _, dup := byID[d.ID]; dup || d.TenantID != params.TenantID || !d.SubscribesTo(params.EventType) {
			continue
		}
		byID[d.ID] = d
		if d.Disabled {
			out.Skipped = append(out.Skipped, SkippedDestination{ID: d.ID, Reason: SkipReasonDisabled, Detail: d.DisabledReason})
			continue
		}
		eps = append(eps, params.enqueueParams(d.ID))
	}
	out.Deliveries, err = c.prepare(ctx, eps, func(_ context.Context, id string) (Destination, error) { return byID[id], nil })
	if err != nil {
		return fail(err)
	}
	return out, nil
}

func (p PublishParams) enqueueParams(destinationID string) EnqueueParams {
	return EnqueueParams{
		EventID: p.EventID, TenantID: p.TenantID, DestinationID: destinationID,
		EventType: p.EventType, Scope: p.Scope, Payload: p.Payload,
	}
}

// validatePublish checks params with Prepare's rules (so a publish that
// reaches no destination is refused exactly like one that reaches many)
// and refuses an event type that is a pattern or that no pattern could
// name.
func (c *Client) validatePublish(ctx context.Context, p PublishParams) error {
	_, err := c.prepare(ctx, []EnqueueParams{p.enqueueParams("publish")},
		func(context.Context, string) (Destination, error) { return Destination{}, nil })
	var ve *ValidationError
	if errors.As(err, &ve) {
		return ve
	}
	if err != nil {
		return err
	}
	if strings.Contains(p.EventType, "*") {
		return invalid(ErrInvalidDelivery, "EventType", `must be a concrete event type, not a pattern (it contains "*")`)
	}
	// A type no pattern could name (a space, a control character, an empty
	// segment) would reach the catch-all destinations and silently miss
	// the ones subscribed by pattern.
	if problem := eventTypePatternProblem(p.EventType); problem != "" {
		return invalid(ErrInvalidDelivery, "EventType", problem)
	}
	return nil
}
