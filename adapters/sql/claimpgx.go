package hooksql

import (
	"database/sql"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/hookrelay/hookrelay"
)

// pgxDeliveryReader reads the rows of a PostgreSQL claim (selectDeliveryCols
// and seq) from pgx's rows, for the same deliveries scanDelivery would
// read, with less garbage per row: the scan targets are its own fields,
// scanned into again for every row; the scope, state and outcome are
// looked at in the driver's buffer (pgtype.DriverBytes) rather than copied
// into strings; and the labels that repeat from row to row (tenant,
// destination, event type, policy version, last reason) are copied once
// per claim and shared by the deliveries that carry them (strings are
// immutable, so sharing is invisible to the caller). A claim allocates the
// ID, event ID and payload of each delivery, and its scope when it has
// one.
type pgxDeliveryReader struct {
	id, eventID                                 pgtype.DriverBytes
	tenant, dest, eventType, policy, reason     pgtype.DriverBytes
	scope, state, outcome, payload              pgtype.DriverBytes
	payloadNull, envelope, attempt, budgetStart int64
	firstQueued, nextAt, updated, token, seq    int64
	windowStart                                 pgtype.Int8
	targets                                     []any
	labels                                      []string // the shared copies
}

func newPgxDeliveryReader() *pgxDeliveryReader {
	r := &pgxDeliveryReader{}
	r.targets = []any{&r.id, &r.eventID, &r.tenant, &r.scope, &r.dest, &r.eventType,
		&r.payload, &r.payloadNull, &r.envelope, &r.attempt, &r.firstQueued, &r.nextAt,
		&r.policy, &r.state, &r.outcome, &r.reason, &r.updated, &r.token, &r.budgetStart, &r.windowStart, &r.seq}
	return r
}

// maxSharedLabels bounds the labels a reader keeps for sharing; past it a
// label is copied for every delivery, as scanDelivery does.
const maxSharedLabels = 64

// label returns b as a string, shared with the earlier deliveries of the
// claim that carry the same one.
func (r *pgxDeliveryReader) label(b []byte) string {
	for _, l := range r.labels {
		if l == string(b) {
			return l
		}
	}
	l := string(b)
	if len(r.labels) < maxSharedLabels {
		r.labels = append(r.labels, l)
	}
	return l
}

// known returns the constant among the states and outcomes a row may hold
// that b spells, so the common values cost no copy; anything else is
// copied, for finishDelivery to refuse.
func known(b []byte) string {
	switch string(b) {
	case "":
		return ""
	case string(hookrelay.StatePending):
		return string(hookrelay.StatePending)
	case string(hookrelay.StateDelivered):
		return string(hookrelay.StateDelivered)
	case string(hookrelay.StateDead):
		return string(hookrelay.StateDead)
	case string(hookrelay.OutcomeAccepted):
		return string(hookrelay.OutcomeAccepted)
	case string(hookrelay.OutcomeRejected):
		return string(hookrelay.OutcomeRejected)
	case string(hookrelay.OutcomeUnknown):
		return string(hookrelay.OutcomeUnknown)
	}
	return string(b)
}

// read scans the current row into d and returns its lease token and seq.
// Like scanDelivery, a driver failure is returned as is and an
// undecodable row is a *DecodeError.
func (r *pgxDeliveryReader) read(rows pgx.Rows, d *hookrelay.Delivery) (token, seq int64, err error) {
	if err := rows.Scan(r.targets...); err != nil {
		return 0, 0, err
	}
	*d = hookrelay.Delivery{
		ID: string(r.id), EventID: string(r.eventID), TenantID: r.label(r.tenant),
		DestinationID: r.label(r.dest), EventType: r.label(r.eventType),
		EnvelopeVersion: int(r.envelope), Attempt: int(r.attempt), BudgetStart: int(r.budgetStart),
		PolicyVersion: r.label(r.policy), LastReason: r.label(r.reason),
	}
	if r.payloadNull == 0 {
		d.Payload = make([]byte, len(r.payload))
		copy(d.Payload, r.payload)
	}
	window := sql.NullInt64{Int64: r.windowStart.Int64, Valid: r.windowStart.Valid}
	if err := finishDelivery(d, r.scope, known(r.state), known(r.outcome), r.firstQueued, r.nextAt, r.updated, window); err != nil {
		return 0, 0, err
	}
	return r.token, r.seq, nil
}
