package hookrelaytest_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/hookrelay/hookrelay"
	"github.com/hookrelay/hookrelay/adapters/memory"
	"github.com/hookrelay/hookrelay/hookrelaytest"
)

// dueMistake is one deliberate mistake of an announcingStore.
type dueMistake int

const (
	dueCorrect dueMistake = iota
	// silentOnceListening never announces "look now" when it starts
	// listening: what was announced before is missed until the next poll.
	silentOnceListening
	// createNotAnnounced announces no created delivery.
	createNotAnnounced
	// announcedBeforeTheWrite announces a created delivery before writing
	// it (a NOTIFY sent outside the transaction, before COMMIT), and
	// writes it once a claim made on hearing it has found nothing.
	announcedBeforeTheWrite
	// laterAnnouncedAsNow announces every piece of work as due now (the
	// zero time), dropping the later due time.
	laterAnnouncedAsNow
	// retryNotAnnounced announces no retry.
	retryNotAnnounced
	// retryAnnouncedAtItsWriteTime announces a retry for the time it was
	// recorded (params.Now), not the time it is due.
	retryAnnouncedAtItsWriteTime
	// redriveNotAnnounced announces no redriven delivery.
	redriveNotAnnounced
	// resumeNotAnnounced announces no resumed destination.
	resumeNotAnnounced
	// lastListenerOnly keeps one listener: a second one started (another
	// worker) replaces the first, which hears nothing more.
	lastListenerOnly
	// callsAfterReturn leaves its listener registered when ListenDue
	// returns, and calls it for every later announcement.
	callsAfterReturn
	// returnsContextError returns ctx.Err() when its context ends.
	returnsContextError
	// releaseNotAnnounced announces no release, not even one with
	// Announce (what a stopping worker hands back).
	releaseNotAnnounced
	// onceListeningOnlyTheFirstTime announces "look now" only the first
	// time a listener starts on the store, not when one starts again
	// (after a lost connection).
	onceListeningOnlyTheFirstTime
)

// announcingStore is a memory store and memory destinations in one value
// with the DueNotifier ability, as the SQL store on PostgreSQL has it:
// every delivery created, retry recorded, delivery redriven, destination
// resumed and release with Announce is announced to every listener, from its own
// ListenDue goroutine, after the write. mistake breaks one of these.
type announcingStore struct {
	*memory.Store
	*memory.Destinations
	mistake dueMistake

	mu        sync.Mutex
	listeners map[*dueSub]bool
	started   bool
	claimed   chan struct{}
}

type dueSub struct {
	ch    chan time.Time
	due   func(time.Time)
	ended bool
}

func newAnnouncingStore(m dueMistake) *announcingStore {
	return &announcingStore{
		Store: memory.NewStore(), Destinations: memory.NewDestinations(), mistake: m,
		listeners: map[*dueSub]bool{}, claimed: make(chan struct{}, 1),
	}
}

func (s *announcingStore) harness() hookrelaytest.Harness {
	// Announcements are made in process: a second is generous.
	return hookrelaytest.Harness{Queue: s, Ledger: s, Destinations: s, DueAnnouncedWithin: time.Second}
}

func (s *announcingStore) announce(at time.Time) {
	if s.mistake == laterAnnouncedAsNow {
		at = time.Time{}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for l := range s.listeners {
		if l.ended {
			l.due(at)
			continue
		}
		select {
		case l.ch <- at:
		default: // a test store: 64 pending announcements are plenty
		}
	}
}

func (s *announcingStore) ListenDue(ctx context.Context, due func(time.Time)) error {
	l := &dueSub{ch: make(chan time.Time, 64), due: due}
	s.mu.Lock()
	if s.mistake == lastListenerOnly {
		clear(s.listeners)
	}
	s.listeners[l] = true
	first := !s.started
	s.started = true
	s.mu.Unlock()
	if s.mistake != silentOnceListening && (first || s.mistake != onceListeningOnlyTheFirstTime) {
		due(time.Time{})
	}
	for {
		select {
		case <-ctx.Done():
			s.mu.Lock()
			if s.mistake == callsAfterReturn {
				l.ended = true
			} else {
				delete(s.listeners, l)
			}
			s.mu.Unlock()
			if s.mistake == returnsContextError {
				return ctx.Err()
			}
			return nil
		case at := <-l.ch:
			due(at)
		}
	}
}

func (s *announcingStore) Claim(ctx context.Context, p hookrelay.ClaimParams) ([]hookrelay.Claim, error) {
	cs, err := s.Store.Claim(ctx, p)
	select {
	case s.claimed <- struct{}{}:
	default:
	}
	return cs, err
}

func (s *announcingStore) Create(ctx context.Context, ds []hookrelay.Delivery) ([]bool, error) {
	if s.mistake == announcedBeforeTheWrite && len(ds) > 0 {
		select {
		case <-s.claimed:
		default:
		}
		s.announce(ds[0].NextAttemptAt)
		select {
		case <-s.claimed: // a listener claimed on hearing it
		case <-time.After(2 * time.Second): // no one claimed: write anyway
		}
	}
	created, err := s.Store.Create(ctx, ds)
	if err != nil || s.mistake == createNotAnnounced || s.mistake == announcedBeforeTheWrite {
		return created, err
	}
	var at time.Time
	found := false
	for i, d := range ds {
		if created[i] && (!found || d.NextAttemptAt.Before(at)) {
			at, found = d.NextAttemptAt, true
		}
	}
	if found {
		s.announce(at)
	}
	return created, nil
}

func (s *announcingStore) announceRetry(p hookrelay.RecordRetryParams) {
	switch s.mistake {
	case retryNotAnnounced:
	case retryAnnouncedAtItsWriteTime:
		s.announce(p.Now)
	default:
		s.announce(p.NextAttemptAt)
	}
}

func (s *announcingStore) RecordRetry(ctx context.Context, p hookrelay.RecordRetryParams) error {
	if err := s.Store.RecordRetry(ctx, p); err != nil {
		return err
	}
	s.announceRetry(p)
	return nil
}

func (s *announcingStore) RecordBatch(ctx context.Context, ws []hookrelay.LedgerWrite) ([]error, error) {
	errs, err := s.Store.RecordBatch(ctx, ws)
	if err != nil {
		return errs, err
	}
	var first *hookrelay.RecordRetryParams
	for i, w := range ws {
		if w.Retry != nil && errs[i] == nil && (first == nil || w.Retry.NextAttemptAt.Before(first.NextAttemptAt)) {
			first = w.Retry
		}
	}
	if first != nil {
		s.announceRetry(*first)
	}
	return errs, nil
}

func (s *announcingStore) RedriveDelivery(ctx context.Context, p hookrelay.RedriveDeliveryParams) (hookrelay.Delivery, bool, error) {
	d, moved, err := s.Store.RedriveDelivery(ctx, p)
	if err == nil && moved && s.mistake != redriveNotAnnounced {
		s.announce(d.NextAttemptAt)
	}
	return d, moved, err
}

func (s *announcingStore) SetPaused(ctx context.Context, id string, paused bool) error {
	if err := s.Destinations.SetPaused(ctx, id, paused); err != nil {
		return err
	}
	if !paused && s.mistake != resumeNotAnnounced {
		s.announce(time.Time{})
	}
	return nil
}

func (s *announcingStore) Release(ctx context.Context, p hookrelay.ReleaseParams) error {
	if err := s.Store.Release(ctx, p); err != nil {
		return err
	}
	if p.Announce && s.mistake != releaseNotAnnounced {
		s.announce(p.At)
	}
	return nil
}

// brokenNotifiers are announcingStores with one mistake each; caughtBy
// lists the DueNotifier cases that must fail on it.
var brokenNotifiers = []brokenStore{
	{name: "SilentOnceListening", mistake: silentOnceListening, caughtBy: []string{
		"DueNotifier/AnnouncesOnceListening", "DueNotifier/ListensAgainWhenStartedAgain",
	}},
	{name: "CreateNotAnnounced", mistake: createNotAnnounced, caughtBy: []string{
		"DueNotifier/CreatedWorkIsAnnouncedOnceClaimable", "DueNotifier/WorkDueLaterIsAnnouncedWithItsDueTime",
		"DueNotifier/EveryListenerHearsEachAnnouncement", "DueNotifier/ListensAgainWhenStartedAgain",
	}},
	{name: "AnnouncedBeforeTheWrite", mistake: announcedBeforeTheWrite, caughtBy: []string{
		"DueNotifier/CreatedWorkIsAnnouncedOnceClaimable", "DueNotifier/WorkDueLaterIsAnnouncedWithItsDueTime",
		"DueNotifier/ListensAgainWhenStartedAgain",
	}},
	{name: "LaterAnnouncedAsNow", mistake: laterAnnouncedAsNow, caughtBy: []string{
		"DueNotifier/WorkDueLaterIsAnnouncedWithItsDueTime", "DueNotifier/RetryIsAnnouncedWithItsDueTime",
		"DueNotifier/RetryRecordedOneAtATimeIsAnnounced",
	}},
	{name: "RetryNotAnnounced", mistake: retryNotAnnounced, caughtBy: []string{
		"DueNotifier/RetryIsAnnouncedWithItsDueTime", "DueNotifier/RetryRecordedOneAtATimeIsAnnounced",
	}},
	{name: "RetryAnnouncedAtItsWriteTime", mistake: retryAnnouncedAtItsWriteTime, caughtBy: []string{
		"DueNotifier/RetryIsAnnouncedWithItsDueTime", "DueNotifier/RetryRecordedOneAtATimeIsAnnounced",
	}},
	{name: "RedriveNotAnnounced", mistake: redriveNotAnnounced, caughtBy: []string{"DueNotifier/RedriveIsAnnounced"}},
	{name: "ResumeNotAnnounced", mistake: resumeNotAnnounced, caughtBy: []string{"DueNotifier/ResumedDestinationIsAnnounced"}},
	{name: "ReleaseNotAnnounced", mistake: releaseNotAnnounced, caughtBy: []string{"DueNotifier/ReleaseAtStopIsAnnounced"}},
	{name: "LastListenerOnly", mistake: lastListenerOnly, caughtBy: []string{"DueNotifier/EveryListenerHearsEachAnnouncement"}},
	{name: "CallsDueAfterReturning", mistake: callsAfterReturn, caughtBy: []string{"DueNotifier/ReturnsNilAndCallsDueNoMoreOnceItsContextEnds"}},
	{name: "ReturnsTheContextsError", mistake: returnsContextError, caughtBy: []string{
		"DueNotifier/ReturnsNilAndCallsDueNoMoreOnceItsContextEnds", "DueNotifier/ListensAgainWhenStartedAgain",
	}},
	{name: "OnceListeningOnlyTheFirstTime", mistake: onceListeningOnlyTheFirstTime, caughtBy: []string{
		"DueNotifier/ListensAgainWhenStartedAgain", "DueNotifier/EveryListenerHearsEachAnnouncement",
		"DueNotifier/ReturnsNilAndCallsDueNoMoreOnceItsContextEnds",
	}},
}

func init() {
	for i := range brokenNotifiers {
		m := brokenNotifiers[i].mistake
		brokenNotifiers[i].harness = func() hookrelaytest.Harness { return newAnnouncingStore(m).harness() }
	}
}

// announcingControl names the unbroken announcingStore to TestBrokenStore.
const announcingControl = "Announcing"

// TestSuiteCatchesBrokenDueNotifiers shows that every DueNotifier case
// rejects a notifier that breaks its rule, and that the correct
// announcingStore passes them all. The memory store has no DueNotifier
// (see RunDueNotifier), so the control is announcingStore.
func TestSuiteCatchesBrokenDueNotifiers(t *testing.T) {
	runCatches(t, brokenNotifiers, announcingControl)
}

func TestAnnouncingStoreIsTheOnlyNotifierControl(t *testing.T) {
	_, ok := hookrelay.As[hookrelay.DueNotifier](memory.NewStore())
	assert.False(t, ok, "the memory store has a DueNotifier now: run the DueNotifier cases' control on it, with the others")
}
