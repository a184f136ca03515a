package hooksql

import (
	"context"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/hookrelay/hookrelay"
)

var _ hookrelay.DueNotifier = (*Store)(nil)

// dueChannel is the PostgreSQL notification channel of the Store's tables.
func (s *Store) dueChannel() string { return s.prefix + "due" }

// notifyDue announces, inside q's transaction (so at its commit), that work
// becomes due at at (zero: now, in the listener's own clock). Only
// PostgreSQL has announcements; elsewhere it does nothing.
func (s *Store) notifyDue(ctx context.Context, q querier, at time.Time) error {
	if s.dialect != Postgres {
		return nil
	}
	if _, err := q.ExecContext(ctx, "SELECT pg_notify($1, $2)", s.dueChannel(), duePayload(at)); err != nil {
		return s.dbErr("notify workers", err)
	}
	return nil
}

// duePayload encodes a due time as an announcement's payload: unix
// nanoseconds, or empty for "now".
func duePayload(at time.Time) string {
	if at.IsZero() {
		return ""
	}
	return strconv.FormatInt(at.UnixNano(), 10)
}

// minListenPool is the smallest pool the PostgreSQL listener takes a
// connection from: with fewer, holding one for the listener could starve
// the worker's own claims, and the worker polls instead.
const minListenPool = 4

// listenSlot reserves a pool connection for one more listener, if the
// listeners (one per worker on the Store) would still leave the pool
// minListenPool-1 connections for everything else; the caller gives it
// back with s.listeners.Add(-1). Without the count, workers sharing a small
// pool each held one, and claims waited for a connection forever.
func (s *Store) listenSlot() bool {
	for {
		n := s.listeners.Load()
		if max := int64(s.db.Stats().MaxOpenConnections); max > 0 && max-(n+1) < minListenPool-1 {
			return false
		}
		if s.listeners.CompareAndSwap(n, n+1) {
			return true
		}
	}
}

// ListenDue implements hookrelay.DueNotifier. On PostgreSQL it holds one
// pooled connection LISTENing on the tables' channel (prefix + "due") and
// calls due for every announcement: deliveries created (Create, EnqueueTx),
// retries recorded (in a batch, or alone by RecordRetry), redriven deliveries, a resumed destination —
// from any process sharing the tables — and once each time it starts
// listening, with a zero time (look now), for whatever was announced while
// no one listened. When the pool is too small for one more listener
// (listenSlot), and on SQLite and MySQL, which have no announcements, it
// waits for ctx and the worker polls. It returns nil when ctx ends, or the
// connection's error.
func (s *Store) ListenDue(ctx context.Context, due func(at time.Time)) error {
	if s.dialect != Postgres {
		<-ctx.Done()
		return nil
	}
	if !s.listenSlot() {
		<-ctx.Done()
		return nil
	}
	defer s.listeners.Add(-1)
	err := s.withPgxConn(ctx, "listen", func(c *pgx.Conn) error {
		if _, err := c.Exec(ctx, "LISTEN "+pgx.Identifier{s.dueChannel()}.Sanitize()); err != nil {
			return err
		}
		// What was announced before this LISTEN (before the first, or while
		// a lost connection was replaced) reached no one: look now.
		due(time.Time{})
		for {
			n, err := c.WaitForNotification(ctx)
			if err != nil {
				// The connection holds a LISTEN; it must not go back to the
				// pool. Closing it ends the LISTEN with it.
				_ = c.Close(context.WithoutCancel(ctx))
				return err
			}
			at := time.Time{}
			if ns, err := strconv.ParseInt(n.Payload, 10, 64); err == nil {
				at = time.Unix(0, ns)
			}
			due(at)
		}
	})
	if ctx.Err() != nil {
		return nil
	}
	if err == errNotPgx {
		<-ctx.Done()
		return nil
	}
	return s.dbErr("listen", err)
}
