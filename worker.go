package hookrelay

import (
	"cmp"
	"container/heap"
	"context"
	"maps"
	"slices"
	"sync"
	"time"
)

// worker is the claim loop's state, owned by a Client.
type worker struct {
	mu        sync.Mutex
	running   bool
	stopClaim chan struct{} // closed by Stop
	cancel    context.CancelFunc
	stopped   chan struct{} // closed when the loop and all attempts ended
	wake      chan struct{} // enqueue or a freed slot: claim now
	inflight  int
	perDest   map[string]int // attempts in flight per destination
	// limits are the destinations' own limits learned at send time, each
	// kept for limitMemory after its destination was last looked up.
	limits expiring[int]
	// limitCounts is how many destinations of limits have each limit, so
	// that the lowest (lowestLimit) is known without looking at them all.
	limitCounts map[int]int
	paused      map[string]time.Time // destination → skip claims until
	blocked     map[string]time.Time // destination → held, rate-limited or open circuit until
	// blockedRecheckAt is when recheckBlocked next reads the guard states
	// of the blocked destinations.
	blockedRecheckAt time.Time
	guards           guardCache
	due              time.Time // a wake-up the store announced for this time; zero: none
	dests            destinationCache
	// held are claims taken ahead (prefetched) that wait for a free slot.
	// A claim is a commit, so the worker claims for the slots that will
	// free up soon too and starts a held claim the moment a slot frees,
	// instead of leaving the slot idle until the next claim returns.
	held     heldClaims
	draining bool // the loop has stopped: held claims are released, not started
	// mixK and mixM are, for a queue that does not honour destination
	// rooms, the last claim's size and its largest share to one
	// destination (blindLimit); zero before the first claim.
	mixK, mixM int
	// perDestDefault is the client's PerDestinationConcurrency (limitFor),
	// and startable is startableFor, for heldClaims.oldestStartable.
	perDestDefault int
	startable      func(id string) bool
}

// heldClaims are claims taken ahead, kept per destination in claim order,
// so a freed slot finds the oldest claim it may start by looking at one
// claim per destination, not at every held claim (up to ClaimAhead times
// Concurrency of them, on every freed slot). The destinations' queues are
// also kept in a heap by their oldest claim (order), so that it looks at
// the few destinations at their limits that hold older claims, not at
// every destination with a held claim (oldestStartable).
type heldClaims struct {
	byDest map[string]*claimQueue // only destinations with held claims
	order  queueOrder             // the queues of byDest, oldest claim first
	spare  []*claimQueue          // emptied queues, kept for their arrays
	n      int
	seq    uint64
	// earliest is no later than the earliest lease expiry of the held
	// claims: add lowers it, pop leaves it (so it may be earlier than the
	// true one), startHeld sets it again when it looks at every queue.
	earliest time.Time
}

type heldClaim struct {
	Claim
	seq uint64 // claim order across destinations
}

// claimQueue is one destination's held claims, oldest first from head.
// Its array is reused as claims come and go (a claim is 344 bytes, and a
// queue taken from the front and grown at the back needed a new array
// every few claims).
type claimQueue struct {
	items []heldClaim
	head  int
	id    string // the destination
	index int    // its place in heldClaims.order
}

// queueOrder is a min-heap (container/heap) of non-empty claim queues by
// their oldest claim.
type queueOrder []*claimQueue

func (o queueOrder) Len() int           { return len(o) }
func (o queueOrder) Less(i, j int) bool { return o[i].front().seq < o[j].front().seq }
func (o queueOrder) Swap(i, j int) {
	o[i], o[j] = o[j], o[i]
	o[i].index, o[j].index = i, j
}
func (o *queueOrder) Push(x any) {
	q := x.(*claimQueue)
	q.index = len(*o)
	*o = append(*o, q)
}
func (o *queueOrder) Pop() any {
	old := *o
	q := old[len(old)-1]
	old[len(old)-1] = nil
	*o = old[:len(old)-1]
	return q
}

// maxSpareQueues caps the emptied queues kept for reuse: a worker that
// served many destinations at once does not keep an array for each.
const maxSpareQueues = 64

func (q *claimQueue) len() int          { return len(q.items) - q.head }
func (q *claimQueue) front() *heldClaim { return &q.items[q.head] }

// count is how many claims are held for destination id.
func (h *heldClaims) count(id string) int {
	if q := h.byDest[id]; q != nil {
		return q.len()
	}
	return 0
}

func (h *heldClaims) add(cl Claim) {
	if h.byDest == nil {
		h.byDest = map[string]*claimQueue{}
	}
	h.seq++
	if h.n == 0 || cl.Lease.ExpiresAt.Before(h.earliest) {
		h.earliest = cl.Lease.ExpiresAt
	}
	id := cl.Delivery.DestinationID
	q := h.byDest[id]
	if q == nil {
		if k := len(h.spare); k > 0 {
			q, h.spare = h.spare[k-1], h.spare[:k-1]
		} else {
			q = &claimQueue{}
		}
		q.id = id
		h.byDest[id] = q
	}
	first := q.len() == 0
	if q.head > 0 && len(q.items) == cap(q.items) {
		// Full at the back with room at the front: move down, not grow.
		k := copy(q.items, q.items[q.head:])
		clear(q.items[k:])
		q.items, q.head = q.items[:k], 0
	}
	q.items = append(q.items, heldClaim{Claim: cl, seq: h.seq})
	if first {
		heap.Push(&h.order, q)
	}
	h.n++
}

// pop removes and returns the oldest held claim to destination id, which
// must have one.
func (h *heldClaims) pop(id string) Claim {
	q := h.byDest[id]
	cl := q.items[q.head].Claim
	q.items[q.head] = heldClaim{} // drop its payload and strings
	if q.head++; q.len() > 0 {
		heap.Fix(&h.order, q.index) // its oldest claim is newer now
	} else {
		heap.Remove(&h.order, q.index)
		q.items, q.head = q.items[:0], 0
		delete(h.byDest, id)
		if len(h.spare) < maxSpareQueues {
			h.spare = append(h.spare, q)
		}
	}
	h.n--
	return cl
}

// drain removes and returns every held claim, oldest first.
func (h *heldClaims) drain() []Claim {
	var all []heldClaim
	for _, q := range h.byDest {
		all = append(all, q.items[q.head:]...)
	}
	slices.SortFunc(all, func(a, b heldClaim) int { return cmp.Compare(a.seq, b.seq) })
	out := make([]Claim, len(all))
	for i, hc := range all {
		out[i] = hc.Claim
	}
	h.byDest, h.order, h.spare, h.n = nil, nil, nil, 0
	return out
}

// oldestStartable returns the queue whose oldest claim is the oldest of
// those whose destination may start one (startable), or nil.
//
// The heap's root is the oldest of all; a queue whose destination is at
// its limit may hide older claims of its children, so the search goes down
// past those only, and not into a subtree whose root is no older than the
// best found (every claim below is newer). It looks at as many queues as
// there are destinations at their limits holding older claims, and their
// children.
func (h *heldClaims) oldestStartable(startable func(id string) bool) *claimQueue {
	var best *claimQueue
	var stackBuf [16]int
	stack := append(stackBuf[:0], 0)
	for len(stack) > 0 {
		i := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if i >= len(h.order) {
			continue
		}
		q := h.order[i]
		if best != nil && q.front().seq >= best.front().seq {
			continue
		}
		if startable(q.id) {
			best = q
			continue
		}
		stack = append(stack, 2*i+2, 2*i+1)
	}
	return best
}

func (w *worker) init() {
	w.startable = w.startableFor
	w.wake = make(chan struct{}, 1)
	w.perDest = map[string]int{}
	w.limits.dropped = w.uncountLimit
	w.limitCounts = map[int]int{}
	w.paused = map[string]time.Time{}
	w.blocked = map[string]time.Time{}
	w.stopped = make(chan struct{})
	close(w.stopped) // a client that never started is stopped
}

func (w *worker) wakeUp() {
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// noteDestination remembers what a send-time lookup said about a
// destination: its concurrency limit, and whether claims should skip it.
func (w *worker) noteDestination(d Destination, now time.Time, cfg Config) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.setLimit(d.ID, max(d.MaxConcurrency, 0), now)
	w.notePausedLocked(d.ID, d.Paused || d.Disabled, now.Add(cfg.PausedRecheck))
}

// limitMemory is how long the worker keeps a destination's own limit
// after the destination was last looked up for an attempt. A worker that
// sends to new destinations all the time (one per customer, say) kept the
// limit of every destination it ever sent to. One forgotten is learned
// again at its next attempt, and held from that attempt on (overLimit);
// until then an idle destination may be claimed up to the default room
// rather than its own.
const limitMemory = 10 * time.Minute

// setLimit records destination id's own concurrency limit (0: none, the
// worker's PerDestinationConcurrency applies), looked up at now, with w.mu
// held.
func (w *worker) setLimit(id string, limit int, now time.Time) {
	old, had := w.limits.entries[id]
	if had && old.v != limit {
		w.uncountLimit(id, old.v)
		w.limits.forget(id)
		had = false
	}
	if limit <= 0 {
		return
	}
	if !had {
		w.limitCounts[limit]++
	}
	w.limits.put(id, limit, now.Add(limitMemory), now)
}

// uncountLimit takes a limit that is no longer id's out of limitCounts;
// it is also what limits calls for the entries its sweeps drop.
func (w *worker) uncountLimit(_ string, limit int) {
	if w.limitCounts[limit]--; w.limitCounts[limit] <= 0 {
		delete(w.limitCounts, limit)
	}
}

// lowestLimit is the lowest limit of its own a destination was last seen
// with, with w.mu held; ok is false when none has one.
func (w *worker) lowestLimit() (lowest int, ok bool) {
	for l := range w.limitCounts {
		if !ok || l < lowest {
			lowest, ok = l, true
		}
	}
	return lowest, ok
}

// notePaused records whether claims skip destination id because it is
// paused or disabled (until recheck, when a delivery of it is looked at
// again) or take it again. With notePausedLocked it is the one writer of
// the pause cache.
func (w *worker) notePaused(id string, paused bool, recheck time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.notePausedLocked(id, paused, recheck)
}

// notePausedLocked is notePaused with w.mu held.
func (w *worker) notePausedLocked(id string, paused bool, recheck time.Time) {
	if paused {
		w.paused[id] = recheck
	} else {
		delete(w.paused, id)
	}
}

// skipping appends to skip the destinations m skips claims for at now and
// forgets those whose time has passed.
func skipping(m map[string]time.Time, now time.Time, skip []string) []string {
	for id, until := range m {
		if now.Before(until) {
			skip = append(skip, id)
		} else {
			delete(m, id)
		}
	}
	return skip
}

// block makes claims skip a destination until at: its guard holds it.
func (w *worker) block(id string, at time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if at.After(w.blocked[id]) {
		w.blocked[id] = at
	}
}

// unblock lets claims take a destination again at once: its circuit closed.
func (w *worker) unblock(id string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.blocked, id)
}

// startableFor reports, with w.mu held, whether destination id is below
// its limit. worker.startable is this method value, made once
// (worker.init), not a closure per freed slot.
func (w *worker) startableFor(id string) bool {
	return w.perDest[id] < w.limitFor(id)
}

// limitFor is destination id's limit, with w.mu held: its own as last
// looked up (even past limitMemory, until a sweep drops it), or the
// worker's PerDestinationConcurrency.
func (w *worker) limitFor(id string) int {
	if e, ok := w.limits.entries[id]; ok {
		return e.v
	}
	return w.perDestDefault
}

// Start launches the worker and returns at once. The worker claims due
// deliveries under leases and processes them with at most Concurrency
// attempts in flight (and at most the per-destination limit per
// destination). Cancelling ctx has the effect of StopAndCancel. Starting a
// running client returns ErrAlreadyStarted; a stopped client may be started
// again.
func (c *Client) Start(ctx context.Context) error {
	if c.sender == nil {
		return invalid(ErrInvalidConfig, "Sender", "is required to start the worker")
	}
	w := &c.worker
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.running {
		return ErrAlreadyStarted
	}
	workCtx, cancel := context.WithCancel(ctx)
	w.running = true
	w.draining = false
	w.stopClaim = make(chan struct{})
	w.cancel = cancel
	w.stopped = make(chan struct{})
	go c.run(workCtx, w.stopClaim, w.stopped)
	return nil
}

// Stop stops claiming and waits for attempts in flight to finish, or for ctx
// to end (then it returns ctx's error and the attempts go on until they end
// or StopAndCancel cancels them). Stopping a stopped or never-started client
// is a no-op.
func (c *Client) Stop(ctx context.Context) error {
	return c.stop(ctx, false)
}

// StopAndCancel stops claiming, cancels attempts in flight (each is released
// without spending its attempt budget) and waits for them to end or for ctx.
//
// Either way the claims the worker holds but has not started are released
// at once, claimable again without an attempt spent. Those releases (as
// one batch, announced once) and those of the attempts StopAndCancel cut
// short ask the queue to announce them (ReleaseParams.Announce): on a
// DueNotifier store (PostgreSQL) the workers of other processes take them
// within milliseconds instead of at their next poll.
func (c *Client) StopAndCancel(ctx context.Context) error {
	return c.stop(ctx, true)
}

// Stopped returns a channel closed once the worker has stopped and every
// attempt it started has ended.
func (c *Client) Stopped() <-chan struct{} {
	c.worker.mu.Lock()
	defer c.worker.mu.Unlock()
	return c.worker.stopped
}

func (c *Client) stop(ctx context.Context, cancel bool) error {
	w := &c.worker
	w.mu.Lock()
	stopped := w.stopped
	if w.running {
		w.running = false
		w.draining = true // held claims are handed back, not started
		close(w.stopClaim)
	}
	if cancel && w.cancel != nil {
		w.cancel()
	}
	w.mu.Unlock()
	select {
	case <-stopped:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// run is the claim loop. It owns every attempt goroutine it starts and
// closes stopped after the last one ended.
func (c *Client) run(ctx context.Context, stopClaim <-chan struct{}, stopped chan struct{}) {
	w := &c.worker
	var attempts sync.WaitGroup
	var batch *batcher
	if c.batchLedger != nil {
		// Writes after a send do not observe cancellation (Process), so the
		// batcher's do not either: StopAndCancel still records what was seen.
		batch = newBatcher(context.WithoutCancel(ctx), c.batchLedger, writeAhead*c.cfg.Concurrency, c.cfg.CompletionLinger, c.clock)
		go batch.run()
	}
	var listening sync.WaitGroup
	if c.dueNotifier != nil {
		listening.Add(1)
		go func() {
			defer listening.Done()
			c.listenDue(ctx, stopClaim)
		}()
	}
	var housekeeping sync.WaitGroup
	if c.cleaner != nil || c.recovery != nil {
		housekeeping.Add(1)
		go func() {
			defer housekeeping.Done()
			c.keepHouse(ctx, stopClaim)
		}()
	}
	// Attempts run on goroutines that stay for the next one: a send grows
	// its goroutine's stack (the HTTP client, signing), and a goroutine
	// started per attempt paid that growth every time. launch hands an
	// attempt to an idle goroutine, or starts one when none is idle (so
	// there are never more than the attempts at once); they end when the
	// worker stops.
	next := make(chan Claim) // unbuffered: a send reaches only an idle goroutine
	quitRunners := make(chan struct{})
	var runners sync.WaitGroup
	settleCtx := context.WithoutCancel(ctx)
	var launch func(cl Claim)
	var runAttempt func(r *attemptRunner, cl Claim)
	// startRunner is apart from launch so that only a new goroutine's first
	// claim is moved to the heap (the goroutine keeps it), not every claim
	// handed over.
	startRunner := func(cl Claim) {
		runners.Add(1)
		go func() {
			defer runners.Done()
			r := &attemptRunner{}
			if batch != nil {
				r.handover = newBatchedWrite()
			}
			// Made once per goroutine, not per attempt: it reads the
			// attempt's destination and slot from r.
			r.freeSlot = func() {
				if !r.held {
					return
				}
				r.held = false
				w.mu.Lock()
				w.inflight--
				if w.perDest[r.destID]--; w.perDest[r.destID] <= 0 {
					delete(w.perDest, r.destID)
				}
				w.mu.Unlock()
				c.startHeld(ctx, launch)
				if c.claimWanted(r.destID) {
					w.wakeUp()
				}
			}
			r.overLimit = func(cl Claim) bool { return c.overLimit(ctx, r, cl, settleCtx, launch) }
			for {
				runAttempt(r, cl)
				select {
				case cl = <-next:
				case <-quitRunners:
					return
				}
			}
		}()
	}
	launch = func(cl Claim) {
		attempts.Add(1)
		select {
		case next <- cl:
			return
		default:
		}
		startRunner(cl)
	}
	runAttempt = func(r *attemptRunner, cl Claim) {
		defer attempts.Done()
		r.destID, r.held = cl.Delivery.DestinationID, true
		err := c.process(ctx, cl, attemptRun{fresh: true, batch: batch, freeSlot: r.freeSlot, overLimit: r.overLimit, handover: r.handover, settleCtx: settleCtx})
		if !r.held && c.claimWanted(r.destID) {
			// The slot freed when the attempt handed its ledger write over,
			// and the claim that woke then may have found nothing: a broker
			// hands out no more than its window of unsettled messages, and
			// this one was settled (acknowledged) only now. Claim again.
			w.wakeUp()
		}
		r.freeSlot()
		if err != nil && ctx.Err() == nil {
			c.observe(ctx, Event{Name: EventWorkerError, Delivery: cl.Delivery, Err: err})
		}
	}
	defer func() {
		c.releaseHeld(ctx)
		attempts.Wait()
		close(quitRunners)
		runners.Wait()
		if batch != nil {
			batch.close() // every attempt has its answer: nothing is left to write
		}
		w.mu.Lock()
		w.running = false
		if w.cancel != nil {
			w.cancel() // also ends the listener
		}
		w.mu.Unlock()
		listening.Wait()
		housekeeping.Wait()
		close(stopped)
	}()

	errDelay := time.Duration(0)
	for {
		select {
		case <-stopClaim:
			return
		case <-ctx.Done():
			return
		default:
		}
		full, err := c.claimOnce(ctx, launch)
		wait := c.cfg.PollInterval
		switch {
		case err != nil:
			// The store is unreachable: report, back off and resume.
			errDelay = min(max(2*errDelay, 50*time.Millisecond), 30*time.Second)
			wait = errDelay
			c.observe(ctx, Event{Name: EventWorkerError, Err: err})
		case full && c.worthClaiming():
			errDelay = 0
			continue // more may be due right now
		default:
			errDelay = 0
		}
		w.mu.Lock()
		if !w.due.IsZero() {
			if d := w.due.Sub(c.clock.Now()); d <= 0 {
				w.due = time.Time{}
				wait = 0
			} else {
				wait = min(wait, d)
			}
		}
		w.mu.Unlock()
		if wait == 0 {
			continue
		}
		if !c.waitFor(ctx, stopClaim, w.wake, wait) {
			return
		}
	}
}

// attemptRunner is what a goroutine that runs attempts keeps from one
// attempt to the next: the attempt's destination and whether it still
// holds its worker slot, the function that frees the slot, and its batch
// write. None of it is made per attempt.
type attemptRunner struct {
	destID    string
	held      bool
	freeSlot  func()
	overLimit func(Claim) bool
	handover  *batchedWrite
}

// overLimit gives back the slot of runner r's attempt, and holds its claim
// again, if its destination has more attempts in flight than its limit
// allows. The worker learns a destination's own limit (MaxConcurrency)
// when an attempt looks the destination up, so until then it starts as
// many as PerDestinationConcurrency: after a start, or once the limit was
// lowered. The attempts over the limit wait for its free slots, with no
// attempt spent and nothing written; the claim goes back to the end of its
// destination's held claims. It is checked and given back in one step, so
// of attempts started together exactly those over the limit wait. A worker
// that is stopping hands the claim back to the queue instead.
func (c *Client) overLimit(ctx context.Context, r *attemptRunner, cl Claim, settleCtx context.Context, launch func(Claim)) bool {
	w := &c.worker
	w.mu.Lock()
	if !r.held || w.perDest[r.destID] <= w.limitFor(r.destID) {
		w.mu.Unlock()
		return false
	}
	r.held = false
	w.inflight--
	w.perDest[r.destID]-- // it was above the limit, so it stays above zero
	draining := w.draining
	if !draining {
		w.held.add(cl)
	}
	w.mu.Unlock()
	if draining {
		now := c.clock.Now()
		if err := c.release(settleCtx, cl.Delivery, cl.Lease, ReasonWorkerStopped, now, now); err != nil {
			c.observe(ctx, Event{Name: EventWorkerError, Delivery: cl.Delivery, Err: err})
		}
		return true
	}
	c.startHeld(ctx, launch) // another destination's claim may take the slot
	return true
}

// waitFor waits on the client's clock for d, or until wake fires (nil:
// never). It returns false when the worker is stopping instead.
func (c *Client) waitFor(ctx context.Context, stopClaim <-chan struct{}, wake <-chan struct{}, d time.Duration) bool {
	timer := c.clock.Timer(d)
	defer timer.Stop()
	select {
	case <-stopClaim:
		return false
	case <-ctx.Done():
		return false
	case <-wake:
	case <-timer.C:
	}
	return true
}

// ClaimAhead is how many times its capacity (and each destination's limit)
// a worker claims, holding what has no slot yet for the slots about to
// free. A claim's cost is mostly fixed (on the SQL store a round trip, a
// plan, a commit; on a broker a fetch round trip), so the more each claim
// takes the less a busy worker waits on its serial claim loop: on
// PostgreSQL, 4 delivered about 40% more than 2 at W=50, and 8 about 25%
// more than 4 (docs/benchmarks.md, 2026-12-05, fifteenth session). The
// claims held must also outlast the next claim's round trip: claims run
// back to back, each takes what the slots used up during the one before,
// so a worker sending r deliveries a second with claims of L seconds runs
// out of held claims once 2·r·L passes (ClaimAhead−1) rounds of its slots.
// With 4, PostgreSQL's claims of 5–12 ms under load left every slot idle
// in about one sample in ten (peerbench --probe). A held claim waits for at
// most ClaimAhead-1 sends to its destination; one whose lease has run half
// down by then is handed back instead of started (startHeld).
//
// It is exported for queues that bound what a process may hold unsettled,
// such as a broker's prefetch window (hookamqp.Config.Prefetch): a window
// below ClaimAhead times the worker's Concurrency caps its claims.
const ClaimAhead = 8

// writeAhead is how many times its capacity in ledger writes a worker lets
// wait for the next batch while one commits, and how many one batch takes.
// An attempt frees its slot once its write is queued, so while a batch
// commits the worker goes on sending until the queue is full; the next
// batch then takes the whole queue. The batch is the SQL stores' serial
// step: with a queue of one round the queue was full most of the time on
// SQLite and PostgreSQL in peerbench (W = 50), finished attempts waited
// there holding their slots, and batches were about 48 writes; with four
// rounds they grew to 94–119 and both stores delivered more
// (docs/benchmarks.md).
const writeAhead = 4

// claimOnce claims up to ClaimAhead times the free capacity, holding what
// has no slot yet for the slots about to free, and launches an attempt per
// held claim that has a slot. It reports whether the claim was full, in
// which case more work may be due at once.
//
// Each destination may take no more than its room: ClaimAhead times its
// limit, less its attempts in flight and its held claims. A queue that
// honours rooms (ClaimsByDestinationRoom) gets those of the destinations
// with anything in flight or held, and a default room no larger than any
// other's, and fills every free slot across destinations in one claim. A
// queue that does not (a
// broker hands out messages in its own order) may return more for one
// destination than its room; see blindLimit for how such a claim is sized
// and keepOrHandBack for what becomes of the excess.
func (c *Client) claimOnce(ctx context.Context, launch func(Claim)) (bool, error) {
	w := &c.worker
	now := c.clock.Now()
	c.recheckBlocked(ctx, now)
	w.mu.Lock()
	free := min(ClaimAhead*c.cfg.Concurrency-w.inflight-w.held.n, ClaimAhead*c.cfg.BatchSize)
	skip := skipping(w.paused, now, nil)
	skip = skipping(w.blocked, now, skip)
	// Rooms are sent for the destinations with attempts in flight or held
	// claims; any other takes the default room, which is no more than the
	// room of the lowest limit a destination has of its own, so that none
	// is claimed beyond its room. Sending the room of every destination
	// ever seen with a limit of its own made each claim cost all of them:
	// with 5,000 such destinations, more than half of a worker's CPU
	// (BenchmarkWorkerManyDestinations). A destination whose own limit is
	// above the default is held to the default room while it has nothing
	// in flight or held, and gets its own from its first claim on.
	defaultRoom := ClaimAhead * c.cfg.PerDestinationConcurrency
	if l, ok := w.lowestLimit(); ok {
		defaultRoom = min(defaultRoom, ClaimAhead*l)
	}
	rooms := make(map[string]int, len(w.perDest)+len(w.held.byDest))
	// Sized for both at once: cloning perDest and then adding the held
	// claims' destinations grew the map again on most claims.
	busy := make(map[string]int, len(w.perDest)+len(w.held.byDest))
	maps.Copy(busy, w.perDest)
	for id, q := range w.held.byDest {
		busy[id] += q.len()
	}
	for id, n := range busy {
		if room := ClaimAhead*w.limitFor(id) - n; room <= 0 {
			// A destination at its room is skipped. A broker hands its
			// messages back with its SkipDelay, before the ledger's lease:
			// no ledger write.
			skip = append(skip, id)
			delete(rooms, id)
		} else {
			rooms[id] = room
		}
	}
	if !c.roomClaims {
		free = c.blindLimit(free, busy, rooms)
	}
	w.mu.Unlock()
	if free <= 0 {
		return false, nil
	}
	// The claim does not observe the worker's cancellation. A store may
	// commit a claim its caller has stopped waiting for (a PostgreSQL claim
	// is sent together with its commit, in one round trip), and deliveries
	// leased that way are held by nobody until their lease runs out: a
	// StopAndCancel would leave them waiting a whole lease instead of
	// handing them back. So the claim runs to its answer — bounded by the
	// lease, past which its claims are worthless — and what it returns after
	// a cancellation is released below.
	claimCtx, cancelClaim := context.WithTimeout(context.WithoutCancel(ctx), c.cfg.LeaseFor)
	claims, err := c.queue.Claim(claimCtx, ClaimParams{
		Now: now, Limit: free, LeaseFor: c.cfg.LeaseFor, Holder: c.cfg.Holder, SkipDestinations: skip,
		DestinationRoom: rooms, DefaultDestinationRoom: defaultRoom,
	})
	cancelClaim()
	if err != nil {
		return false, opErr("queue.claim", "", err)
	}
	if ctx.Err() != nil {
		// StopAndCancel came while the claim was on its way: hand every
		// claim back at once, no attempt spent.
		c.releaseStopped(context.WithoutCancel(ctx), claims)
		return false, nil
	}
	for _, cl := range claims {
		c.observe(ctx, Event{Name: EventClaimed, Delivery: cl.Delivery})
	}
	excess := c.keepOrHandBack(claims)
	c.startHeld(ctx, launch)
	for _, cl := range excess {
		if err := c.release(context.WithoutCancel(ctx), cl.Delivery, cl.Lease, ReasonDestinationSaturated, now, now); err != nil {
			c.observe(ctx, Event{Name: EventWorkerError, Delivery: cl.Delivery, Err: err})
		}
	}
	return len(claims) == free && len(excess) == 0, nil
}

// blindLimit sizes a claim from a queue that does not honour destination
// rooms, with w.mu held. free is the worker's free capacity (ClaimAhead
// times it), busy the destinations with attempts in flight or held claims,
// rooms what each may still take.
//
// Such a queue hands out messages in its own order, so a claim may bring
// more deliveries to one destination than that destination's room. They
// cannot be held beyond the room (keepOrHandBack), so they would be leased
// only to be handed back: two ledger writes and a redelivery each, and
// while a destination has a backlog at the head of the broker, on every
// claim. Holding every claim to the tightest room (what the worker once
// did) avoids that but takes a few deliveries per broker round trip, about
// half of what a worker does when no limit holds it back.
//
// So the claim is sized by how the queue's order mixed destinations last
// time: a claim of k deliveries with at most m to one destination suggests
// that one of L will bring about L·m/k to one destination, and
// L = tightest·k/m keeps that within the tightest room. Deliveries spread
// evenly over 16 destinations (m/k = 1/16) fill the whole free capacity in
// one claim; a backlog to one destination at the head of the queue
// (m/k = 1) gets claims of its room, and nothing claimed is handed back.
// When the mix changes (a burst to one destination after an even spread),
// one claim may overshoot; what exceeds a destination's room is handed back
// at once, and the next claim is sized by the new mix. The first claim,
// with no mix seen, is held to the tightest room.
func (c *Client) blindLimit(free int, busy, rooms map[string]int) int {
	w := &c.worker
	tightest := ClaimAhead * c.cfg.PerDestinationConcurrency
	for id := range busy {
		if room, ok := rooms[id]; ok {
			tightest = min(tightest, room)
		}
	}
	k, m := max(w.mixK, 1), max(w.mixM, 1)
	return min(free, tightest*k/m)
}

// keepOrHandBack holds each claim for a free slot (startHeld starts it) as
// long as its destination is within its room: ClaimAhead times its limit,
// attempts in flight and held claims together. This bound is what keeps a
// destination with a long backlog from filling the worker's held capacity
// while other destinations' due deliveries wait behind it: it holds at most
// ClaimAhead rounds of its own slots. It returns the claims beyond a room
// (only a queue that does not honour rooms returns them), to be handed back
// at once without spending an attempt, and records the claim's mix for
// blindLimit.
func (c *Client) keepOrHandBack(claims []Claim) (excess []Claim) {
	w := &c.worker
	w.mu.Lock()
	defer w.mu.Unlock()
	if c.roomClaims {
		for _, cl := range claims {
			w.held.add(cl)
		}
		return nil
	}
	if len(claims) == 0 {
		return nil
	}
	per := map[string]int{}
	m := 0
	for _, cl := range claims {
		id := cl.Delivery.DestinationID
		per[id]++
		m = max(m, per[id])
		if w.perDest[id]+w.held.count(id) >= ClaimAhead*w.limitFor(id) {
			excess = append(excess, cl)
			continue
		}
		w.held.add(cl)
	}
	w.mixK, w.mixM = len(claims), m
	return excess
}

// claimWanted reports whether a slot freed for destination destID should
// wake the claim loop: only when the claims held for destID are down to
// less than one round of its slots, and a claim is worthwhile for the
// worker as a whole (claimWorthwhile). The claim loop then takes a batch of
// claims at once — one round trip for many deliveries — rather than one
// claim per freed slot, each for the one or two deliveries that finished
// since the last. Work for other destinations is claimed with that batch,
// or at the next enqueue, announcement or poll.
//
// The second condition matters with many destinations: spread over more
// destinations than it holds claims, the worker holds less than a round
// for nearly every one, and the first condition alone woke it on nearly
// every freed slot — about 7 deliveries a claim with 200 or 5,000
// destinations against 32 with 10 (BenchmarkWorkerManyDestinations).
func (c *Client) claimWanted(destID string) bool {
	w := &c.worker
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.held.count(destID) >= w.limitFor(destID) {
		return false
	}
	return w.claimWorthwhile(c.cfg.Concurrency)
}

// worthClaiming is claimWorthwhile taking w.mu: after a full claim the
// loop claims again at once only if it is, and otherwise waits for a freed
// slot to wake it (claimWanted), an announcement or the poll.
func (c *Client) worthClaiming() bool {
	w := &c.worker
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.claimWorthwhile(c.cfg.Concurrency)
}

// claimWorthwhile reports, with w.mu held, whether a claim now would be
// worth its round trip: a slot is idle that the held claims could not fill
// (their destinations are at their limits), or the worker can take at
// least a round of its slots. Each freed slot starts a held claim and so
// leaves the worker one claim further from full: a busy worker claims
// about once per round of its slots, not once per freed slot.
func (w *worker) claimWorthwhile(concurrency int) bool {
	return w.inflight < concurrency || ClaimAhead*concurrency-w.inflight-w.held.n >= concurrency
}

// startHeld launches held claims, oldest first, while there are free slots
// and their destinations have room. A held claim whose lease has run half
// down is handed back instead (ReasonDestinationSaturated, no attempt
// spent): it waited on a slow destination, and a send started now could
// outlast its lease; it is claimed again with a fresh one.
func (c *Client) startHeld(ctx context.Context, launch func(Claim)) {
	w := &c.worker
	// A freed slot usually starts one held claim: room for a few on the
	// stack, where start stays unless more are started at once.
	var startBuf [2]Claim
	start, stalePops := startBuf[:0], []Claim(nil)
	now := c.clock.Now()
	w.mu.Lock()
	if !w.draining {
		// Leases run out in claim order, so a destination's stale claims
		// are the oldest of its queue. The queues are looked at only when
		// the earliest held lease may be stale: a slot frees on every
		// delivery, and with many destinations held that look is most of
		// the slot's cost (BenchmarkWorkerManyDestinations).
		stale := func(exp time.Time) bool { return !now.Before(exp.Add(-c.cfg.LeaseFor / 2)) }
		if w.held.n > 0 && stale(w.held.earliest) {
			var earliest time.Time
			for id, q := range w.held.byDest {
				for q.len() > 0 && stale(q.front().Lease.ExpiresAt) {
					stalePops = append(stalePops, w.held.pop(id))
				}
				if q.len() > 0 && (earliest.IsZero() || q.front().Lease.ExpiresAt.Before(earliest)) {
					earliest = q.front().Lease.ExpiresAt
				}
			}
			w.held.earliest = earliest
		}
		for w.inflight < c.cfg.Concurrency {
			q := w.held.oldestStartable(w.startable)
			if q == nil {
				break
			}
			next := q.id
			w.inflight++
			w.perDest[next]++
			start = append(start, w.held.pop(next))
		}
	}
	w.mu.Unlock()
	for _, cl := range start {
		launch(cl)
	}
	for _, cl := range stalePops {
		if err := c.release(context.WithoutCancel(ctx), cl.Delivery, cl.Lease, ReasonDestinationSaturated, now, now); err != nil {
			c.observe(ctx, Event{Name: EventWorkerError, Delivery: cl.Delivery, Err: err})
		}
	}
}

// releaseHeld hands back the claims held when the worker stops, without
// spending their attempts: they are claimable again at once.
func (c *Client) releaseHeld(ctx context.Context) {
	w := &c.worker
	w.mu.Lock()
	w.draining = true
	held := w.held.drain()
	w.mu.Unlock()
	c.releaseStopped(context.WithoutCancel(ctx), held)
}

// listenDue runs the store's wake-up listener (DueNotifier) until the
// worker stops, restarting it with a backoff when it fails: polling covers
// the gap, so a failed listener costs latency, never a delivery.
func (c *Client) listenDue(ctx context.Context, stopClaim <-chan struct{}) {
	w := &c.worker
	const maxDelay = 30 * time.Second
	delay := time.Duration(0)
	for {
		started := c.clock.Now()
		err := c.dueNotifier.ListenDue(ctx, func(at time.Time) {
			// A zero at is work due now: the wake-up is enough. Stored, it
			// would read as no due time and erase a later one announced.
			if !at.IsZero() {
				w.mu.Lock()
				if w.due.IsZero() || at.Before(w.due) {
					w.due = at
				}
				w.mu.Unlock()
			}
			w.wakeUp()
		})
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			c.observe(ctx, Event{Name: EventWorkerError, Err: opErr("queue.listen_due", "", err)})
		}
		if c.clock.Since(started) >= maxDelay {
			// It listened for a while: this is a new failure, not one in
			// a row, and starts from the shortest backoff again.
			delay = 0
		}
		delay = min(max(2*delay, 100*time.Millisecond), maxDelay)
		if !c.waitFor(ctx, stopClaim, nil, delay) {
			return
		}
	}
}
