package hooksql

import (
	"context"
	"database/sql"

	"github.com/jackc/pgx/v5"

	"github.com/hookrelay/hookrelay"
)

// insertUnnestPostgres is Create's statement on PostgreSQL through pgx: the
// chunk's rows go as one array per column and unnest turns them back into
// rows, in the arrays' order (WITH ORDINALITY … ORDER BY keeps the ID
// order insertDeliveries sorted them into, so concurrent enqueues lock in
// the same order). Its text is the same for every chunk size, so pgx
// prepares it once per connection and PostgreSQL plans it once; the
// multi-row VALUES form took a statement with 17 placeholders a row, a
// text and a plan for each chunk size, and pgx encoded each value as its
// own parameter.
//
// The same statement announces the new work: the announce CTE calls
// pg_notify once, with the earliest due time of the rows it inserted
// (duePayload's form: unix nanoseconds, empty for "now", which a zero time
// is stored as), and only if it inserted any, as announceCreated does.
// pg_notify is volatile, so PostgreSQL runs the CTE in full; the main
// query reads its one row (NULL id) or none, and the reader skips it.
const insertUnnestPostgres = `WITH ins AS (
	INSERT INTO {d} (` + insertDeliveryCols + `)
	SELECT id, event_id, tenant_id, scope, destination_id, event_type, payload, envelope_version, attempt,
		first_queued_at, next_attempt_at, policy_version, state, last_outcome, last_reason, updated_at, budget_start, lease_token
	FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::bytea[],
		$8::integer[], $9::integer[], $10::bigint[], $11::bigint[], $12::text[], $13::text[], $14::text[],
		$15::text[], $16::bigint[], $17::integer[], $18::bigint[])
		WITH ORDINALITY AS r(id, event_id, tenant_id, scope, destination_id, event_type, payload, envelope_version,
			attempt, first_queued_at, next_attempt_at, policy_version, state, last_outcome, last_reason,
			updated_at, budget_start, lease_token, ord)
	ORDER BY ord
	ON CONFLICT (id) DO NOTHING
	RETURNING id, next_attempt_at
), announce AS (
	SELECT pg_notify($19, CASE WHEN min(next_attempt_at) = $20 THEN '' ELSE min(next_attempt_at)::text END)
	FROM ins HAVING count(*) > 0
)
SELECT id FROM ins UNION ALL SELECT NULL FROM announce`

// createPgx is Create on a pgx connection: every chunk's statement in one
// pipeline, which PostgreSQL runs as one implicit transaction — one round
// trip and one commit instead of BEGIN, a statement per chunk, the
// announcement and COMMIT, each waited for. ctx is honoured until the
// pipeline is sent (sendPipeline). A deadlock or serialization
// failure runs it again, as inTx does. It returns errNotPgx, having done
// nothing, when the pool's driver is not pgx's.
func (s *Store) createPgx(ctx context.Context, ds []hookrelay.Delivery, rows []deliveryRow) ([]bool, error) {
	first, chunks := s.unnestChunks(ds, rows)
	query := s.q(insertUnnestPostgres)
	var created []bool
	err := retried(func() error {
		created = make([]bool, len(ds))
		// A new batch for each try: pgx keeps what it learns of a
		// statement on a connection in the batch's queued queries.
		b := &pgx.Batch{}
		for _, args := range chunks {
			b.Queue(query, args...)
		}
		return s.withPgxConn(ctx, "create", func(c *pgx.Conn) error {
			br, err := s.sendPipeline(ctx, c, "create", b)
			if err != nil {
				return err
			}
			for range b.Len() {
				res, err := br.Query()
				if err != nil {
					_ = br.Close()
					return s.dbErr("create", err)
				}
				var id sql.NullString
				if _, err := pgx.ForEachRow(res, []any{&id}, func() error {
					markCreated(created, first, id)
					return nil
				}); err != nil {
					_ = br.Close()
					return s.dbErr("create", err)
				}
			}
			if err := br.Close(); err != nil {
				return s.dbErr("create: commit", err)
			}
			return nil
		})
	})
	if err != nil {
		return nil, err
	}
	return created, nil
}

// createUnnest is createPgx's statements run one by one on q (the
// caller's transaction, in EnqueueTx), through database/sql: for a pool of
// pgx's stdlib driver, which passes slices through as arrays.
func (s *Store) createUnnest(ctx context.Context, q querier, ds []hookrelay.Delivery, rows []deliveryRow) ([]bool, error) {
	first, chunks := s.unnestChunks(ds, rows)
	query := s.q(insertUnnestPostgres)
	created := make([]bool, len(ds))
	for _, args := range chunks {
		if err := func() error {
			res, err := q.QueryContext(ctx, query, args...)
			if err != nil {
				return err
			}
			defer res.Close()
			for res.Next() {
				var id sql.NullString
				if err := res.Scan(&id); err != nil {
					return err
				}
				markCreated(created, first, id)
			}
			return res.Err()
		}(); err != nil {
			return nil, s.dbErr("create", err)
		}
	}
	return created, nil
}

// unnestChunks maps each ID of ds to its first occurrence and returns the
// insertUnnestPostgres arguments of each chunk of the new rows, in ID
// order (firstOccurrences, chunkLen).
func (s *Store) unnestChunks(ds []hookrelay.Delivery, rows []deliveryRow) (map[string]int, [][]any) {
	first, order := firstOccurrences(ds)
	var chunks [][]any
	for len(order) > 0 {
		n := chunkLen(ds, order)
		chunks = append(chunks, unnestArgs(rows, order[:n], s.dueChannel()))
		order = order[n:]
	}
	return first, chunks
}

// markCreated records a row the statement returned: an inserted ID, or
// NULL for the announcement's row, which marks nothing.
func markCreated(created []bool, first map[string]int, id sql.NullString) {
	if i, ok := first[id.String]; id.Valid && ok {
		created[i] = true
	}
}

// unnestArgs is insertUnnestPostgres's arguments for rows[idx…]: a slice
// per column of the values encodeDelivery made (their types are its), then
// the announcement's channel and the stored form of a zero time.
func unnestArgs(rows []deliveryRow, idx []int, channel string) []any {
	args := make([]any, 0, deliveryColCount+2)
	for c := range deliveryColCount {
		switch c {
		case 6: // payload: nil stays NULL, apart from an empty payload
			v := make([][]byte, len(idx))
			for k, i := range idx {
				v[k], _ = rows[i][c].([]byte)
			}
			args = append(args, v)
		case 7, 8, 16: // envelope_version, attempt, budget_start
			v := make([]int64, len(idx))
			for k, i := range idx {
				v[k] = int64(rows[i][c].(int))
			}
			args = append(args, v)
		case 9, 10, 15, 17: // first_queued_at, next_attempt_at, updated_at, lease_token
			v := make([]int64, len(idx))
			for k, i := range idx {
				v[k] = rows[i][c].(int64)
			}
			args = append(args, v)
		default:
			v := make([]string, len(idx))
			for k, i := range idx {
				v[k] = rows[i][c].(string)
			}
			args = append(args, v)
		}
	}
	return append(args, channel, int64(zeroTime))
}
