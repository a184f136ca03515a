package hookrelaytest_test

import (
	"context"
	"errors"
	"sync"

	"github.com/hookrelay/hookrelay"
	"github.com/hookrelay/hookrelay/adapters/memory"
	"github.com/hookrelay/hookrelay/hookrelaytest"
)

// Broken Create implementations for what a republished event gets, listed
// in brokenStores with the cases that reject them.

func init() {
	brokenStores = append(brokenStores,
		brokenStore{
			name:     "CreateRevivesAnEndedRecord",
			harness:  func() hookrelaytest.Harness { return storeHarness(&revivingCreate{requeueing: newRequeueing()}) },
			caughtBy: []string{"Publish/RepublishAfterTheDeliveryEndedCreatesNothing"},
		},
		brokenStore{
			name:     "CreateRefusesARemovedID",
			harness:  func() hookrelaytest.Harness { return storeHarness(&tombstoningCreate{Store: memory.NewStore()}) },
			caughtBy: []string{"Publish/RepublishAfterRetentionRemovedTheRecordIsANewDelivery"},
		},
	)
}

// revivingCreate treats a delivery ID as taken only while its record is
// pending: creating a delivered or dead one again reports it created and
// makes it claimable, as an upsert guarded by state = 'pending' would.
type revivingCreate struct{ *requeueing }

func (s *revivingCreate) Create(ctx context.Context, ds []hookrelay.Delivery) ([]bool, error) {
	created, err := s.Store.Create(ctx, ds)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, d := range ds {
		if got, err := s.Store.Get(ctx, d.ID); err == nil && got.State != hookrelay.StatePending {
			got.State, got.Attempt, got.NextAttemptAt = hookrelay.StatePending, 1, d.NextAttemptAt
			s.queue[d.ID] = got
			created[i] = true
		}
	}
	return created, nil
}

// tombstoningCreate remembers every delivery ID it ever stored and never
// stores one again, even after retention removed its record: the event is
// reported as published and nothing is sent.
type tombstoningCreate struct {
	*memory.Store
	mu   sync.Mutex
	seen map[string]bool
}

func (s *tombstoningCreate) Create(ctx context.Context, ds []hookrelay.Delivery) ([]bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.seen == nil {
		s.seen = map[string]bool{}
	}
	var fresh []hookrelay.Delivery
	var at []int
	for i, d := range ds {
		if _, err := s.Store.Get(ctx, d.ID); s.seen[d.ID] && errors.Is(err, hookrelay.ErrNotFound) {
			continue
		}
		fresh, at = append(fresh, d), append(at, i)
	}
	got, err := s.Store.Create(ctx, fresh)
	if err != nil {
		return nil, err
	}
	created := make([]bool, len(ds))
	for k, i := range at {
		created[i] = got[k]
		s.seen[ds[i].ID] = true
	}
	return created, nil
}
