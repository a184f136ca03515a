package hookrelay

import (
	"context"
	"time"
)

// keepHouse runs the worker's periodic store work until it stops: the
// retention cleaner every Retention.Interval and, with a broker queue, the
// recovery of unpublished deliveries every PollInterval. Both start with a
// pass at once. A cleaner pass over a large backlog (minutes of full
// batches) stops between batches when the recovery is due, and goes on
// after it.
func (c *Client) keepHouse(ctx context.Context, stopClaim <-chan struct{}) {
	var nextClean, nextRecover time.Time
	for {
		now := c.clock.Now()
		if c.cleaner != nil && !now.Before(nextClean) {
			if !c.cleanHistory(ctx, stopClaim, nextRecover) {
				nextClean = c.clock.Now().Add(c.cfg.Retention.Interval)
			} // else it stopped for the recovery: due again at once
		}
		if c.recovery != nil && !c.clock.Now().Before(nextRecover) {
			c.recoverUnpublished(ctx)
			nextRecover = c.clock.Now().Add(c.cfg.PollInterval)
		}
		// The wait is measured from now, after the passes: measured from
		// before them, it began at their end and pushed the next pass
		// back by their length.
		now = c.clock.Now()
		wait := time.Duration(1<<63 - 1)
		if c.cleaner != nil {
			wait = min(wait, nextClean.Sub(now))
		}
		if c.recovery != nil {
			wait = min(wait, nextRecover.Sub(now))
		}
		if !c.waitFor(ctx, stopClaim, nil, max(wait, 0)) {
			return
		}
	}
}

// cleanHistory runs one cleaner pass: batches until one is not full, the
// worker stops or the store fails (reported; the next pass tries again).
// Each batch is reported to the observer per destination and state. It
// also stops after a full batch once the recovery is due (recoverAt), and
// then reports true: the pass is not over.
func (c *Client) cleanHistory(ctx context.Context, stopClaim <-chan struct{}, recoverAt time.Time) bool {
	for {
		res, err := c.cleaner.CleanHistory(ctx, CleanHistoryParams{
			Now: c.clock.Now(), Policy: *c.cfg.Retention, Limit: c.cfg.Retention.BatchSize,
		})
		// A failed call may have done part of its work (a step that
		// committed): its counts are reported either way.
		for _, n := range res.Counts {
			d := Delivery{DestinationID: n.DestinationID, State: n.State}
			if n.Removed > 0 {
				c.observe(ctx, Event{Name: EventHistoryRemoved, Delivery: d, Count: n.Removed})
			}
			if n.Compacted > 0 {
				c.observe(ctx, Event{Name: EventAttemptsCompacted, Delivery: d, Count: n.Compacted})
			}
		}
		if err != nil {
			if ctx.Err() == nil {
				c.observe(ctx, Event{Name: EventWorkerError, Err: opErr("ledger.clean_history", "", err)})
			}
			return false
		}
		if !res.More {
			return false
		}
		if c.recovery != nil && !c.clock.Now().Before(recoverAt) {
			return true
		}
		select {
		case <-stopClaim:
			return false
		case <-ctx.Done():
			return false
		default:
		}
	}
}

// recoverUnpublished publishes again the pending deliveries that went
// unleased for the grace period: at most BatchSize a pass.
func (c *Client) recoverUnpublished(ctx context.Context) {
	now := c.clock.Now()
	var skip []string
	c.worker.mu.Lock()
	for id, until := range c.worker.paused {
		if now.Before(until) {
			skip = append(skip, id)
		}
	}
	c.worker.mu.Unlock()
	ds, err := c.recovery.TakeUnpublished(ctx, RecoverUnpublishedParams{
		Now: now, Grace: c.cfg.RecoverUnpublishedAfter, Limit: c.cfg.BatchSize, SkipDestinations: skip,
	})
	if err == nil && len(ds) > 0 {
		err = c.queue.Enqueue(ctx, ds)
		if err == nil {
			for _, d := range ds {
				c.observe(ctx, Event{Name: EventRepublished, Delivery: d})
			}
			c.worker.wakeUp() // claim the message now, not at the next poll
		}
	}
	if err != nil && ctx.Err() == nil {
		c.observe(ctx, Event{Name: EventWorkerError, Err: opErr("queue.republish", "", err)})
	}
}
