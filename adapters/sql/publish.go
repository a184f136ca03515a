package hooksql

import (
	"context"
	"database/sql"
	"slices"
	"strings"

	"github.com/hookrelay/hookrelay"
)

var _ hookrelay.DestinationFinder = (*Store)(nil)

// DestinationsFor implements hookrelay.DestinationFinder. With a tenant, it
// reads only that tenant's rows, through the destinations_tenant index
// (migration 0003), and keeps those whose event types match in Go with
// hookrelay's own matcher. A tenant ID no destination can have (overlong,
// not UTF-8) selects nothing.
func (s *Store) DestinationsFor(ctx context.Context, p hookrelay.DestinationsForParams) ([]hookrelay.Destination, error) {
	query, args := "SELECT "+destinationCols+" FROM {dst}", []any(nil)
	if p.TenantID != "" {
		if checkString("TenantID", p.TenantID, true) != nil {
			return []hookrelay.Destination{}, nil // Put refuses such a tenant
		}
		query, args = query+" WHERE tenant_id = ?", []any{p.TenantID}
	}
	rows, err := s.db.QueryContext(ctx, s.q(query), args...)
	if err != nil {
		return nil, s.dbErr("list destinations", err)
	}
	defer rows.Close()
	out := []hookrelay.Destination{}
	for rows.Next() {
		d, err := scanDestination(rows)
		if err != nil {
			return nil, s.destinationErr("list destinations", err)
		}
		if p.EventType == "" || d.SubscribesTo(p.EventType) {
			out = append(out, d)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, s.dbErr("list destinations", err)
	}
	// Sorted here: database collations need not sort like Go strings.
	slices.SortFunc(out, func(a, b hookrelay.Destination) int { return strings.Compare(a.ID, b.ID) })
	return out, nil
}

// PublishTx stores a fan-out built by hookrelay.Client.PreparePublish in the
// caller's transaction, like EnqueueTx: the business write and every
// delivery of the event commit or roll back together. It reports the
// publish as Client.Publish would: per destination, the delivery ID and
// whether a record was created (false: the event already reached that
// destination, and nothing was changed). After commit the deliveries are
// claimable by any worker on this Store's tables; a worker that sleeps
// until its next poll picks them up then. With a broker queue, and for tx,
// see EnqueueTx (after the commit, Client.Publish with the same params
// publishes the messages at once).
//
// The fan-out is the one p was built from: PreparePublish reads the
// destinations through the Client's DestinationFinder, on its own
// connection and outside tx, before PublishTx is called. A destination the
// caller adds, changes or subscribes in tx is not seen by that read (build
// the fan-out after committing such a change); one paused, disabled or
// removed after the read still gets its delivery, held or dead-lettered as
// Client.Publish documents.
func (s *Store) PublishTx(ctx context.Context, tx *sql.Tx, p hookrelay.PreparedPublish) (hookrelay.PublishResult, error) {
	created, err := s.enqueueCallerTx(ctx, "PublishTx", tx, p.Deliveries)
	if err != nil {
		return hookrelay.PublishResult{}, err
	}
	return p.Result(created), nil
}
