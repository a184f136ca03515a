package hookrelaytest_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"go.uber.org/goleak"

	"github.com/hookrelay/hookrelay"
	"github.com/hookrelay/hookrelay/adapters/memory"
	"github.com/hookrelay/hookrelay/hookrelaytest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// brokenStore is a memory store with one deliberate mistake, of the kind
// an adapter written from the docs alone could make. caughtBy lists the
// suite cases (paths under Run) that must fail on it.
type brokenStore struct {
	name     string
	harness  func() hookrelaytest.Harness
	caughtBy []string
	// mistake is a broken announcingStore's (catches_due_test.go).
	mistake dueMistake
}

func storeHarness[S interface {
	hookrelay.Queue
	hookrelay.Ledger
}](s S) hookrelaytest.Harness {
	return hookrelaytest.Harness{Queue: s, Ledger: s, Destinations: memory.NewDestinations()}
}

var brokenStores = []brokenStore{
	{
		name:     "BatchIgnoresFencing",
		harness:  func() hookrelaytest.Harness { return storeHarness(&unfencedBatch{Store: memory.NewStore()}) },
		caughtBy: []string{"BatchLedger/EachWriteIsFencedByItsOwnLease", "BatchLedger/ManyDeliveredWritesAreEachJudgedAndStoredAsSingleWrites"},
	},
	{
		name:     "BatchResultsOutOfWriteOrder",
		harness:  func() hookrelaytest.Harness { return storeHarness(&reorderedBatch{Store: memory.NewStore()}) },
		caughtBy: []string{"BatchLedger/ManyDeliveredWritesAreEachJudgedAndStoredAsSingleWrites"},
	},
	{
		name:     "BatchFailsWholeOnOneRefusedRow",
		harness:  func() hookrelaytest.Harness { return storeHarness(&allOrNothingBatch{Store: memory.NewStore()}) },
		caughtBy: []string{"BatchLedger/EachWriteIsFencedByItsOwnLease"},
	},
	{
		name:     "BatchHalfWrittenWhenItFails",
		harness:  func() hookrelaytest.Harness { return storeHarness(&halfWrittenBatch{Store: memory.NewStore()}) },
		caughtBy: []string{"BatchLedger/AFailedBatchWritesNothingAndEveryDeliveryComesBack"},
	},
	{
		name:     "BatchWritesEachDeliveryOnce",
		harness:  func() hookrelaytest.Harness { return storeHarness(&onceEachBatch{Store: memory.NewStore()}) },
		caughtBy: []string{"BatchLedger/TwoWritesToOneDeliveryAreJudgedInOrder"},
	},
	{
		name:     "ClaimIgnoresDestinationRooms",
		harness:  func() hookrelaytest.Harness { return storeHarness(&roomBlindQueue{Store: memory.NewStore()}) },
		caughtBy: []string{"ClaimsByDestinationRoom/OneClaimFillsEveryDestinationsRoom"},
	},
	{
		name:    "EnqueueRequeuesAtTheCallersTime",
		harness: func() hookrelaytest.Harness { return storeHarness(newRequeueing()) },
		caughtBy: []string{
			"Queue/EnqueueNeverRevivesADeadDelivery",
			"Queue/EnqueueNeverResendsADeliveredDelivery",
			"Queue/EnqueueNeverHandsOutALeasedDeliveryTwice",
			"Queue/EnqueueTakesTheDueTimeFromTheLedger",
			"Engine/RepeatedEnqueueNeverResendsOrRevives",
			"Engine/RepeatedEnqueueOfALeasedDeliverySendsOnce",
			"Engine/RepeatedEnqueueThroughARunningWorker",
			"LedgerQueue/AFreshClaimIsPending",
		},
	},
	{
		name:     "TokenResetWhenTheLeaseEnds",
		harness:  func() hookrelaytest.Harness { return storeHarness(newTokenReset()) },
		caughtBy: []string{"Leases/TokensGrowAcrossExpiryReleaseAndWrites"},
	},
	{
		name:     "TokensStartOverWhenARemovedRecordIsCreatedAgain",
		harness:  func() hookrelaytest.Harness { return storeHarness(newTokenPerRecord()) },
		caughtBy: []string{"Retention/AHolderOfARemovedRecordCannotWriteToTheRecordCreatedAgain"},
	},
	{
		name:    "WritesAcceptedAfterRelease",
		harness: func() hookrelaytest.Harness { return storeHarness(newWritesAfterRelease()) },
		caughtBy: []string{
			"Leases/MarkDelivered/EndedByRelease",
			"Leases/RecordRetry/EndedByRelease",
			"Leases/RecordDeadLetter/EndedByRelease",
		},
	},
	{
		name:    "WritesRefusedOnceTheLeaseExpired",
		harness: func() hookrelaytest.Harness { return storeHarness(&timeFenced{Store: memory.NewStore()}) },
		caughtBy: []string{
			"Leases/MarkDelivered/ExpiredUnclaimed",
			"Leases/RecordRetry/ExpiredUnclaimed",
			"Leases/RecordDeadLetter/ExpiredUnclaimed",
		},
	},
	{
		name:    "IgnoresTheToken",
		harness: func() hookrelaytest.Harness { return storeHarness(newTokenBlind()) },
		caughtBy: []string{
			"Leases/MarkDelivered/Superseded",
			"Leases/RecordRetry/Superseded",
			"Leases/RecordDeadLetter/Superseded",
			"Leases/Acknowledge/Superseded",
			"Leases/RetryAt/Superseded",
			"Leases/DeadLetter/Superseded",
			"Leases/Release/Superseded",
			"Leases/ReleaseLease/Superseded",
		},
	},
	{
		name:    "TransitionsRetimeAnEndedLease",
		harness: func() hookrelaytest.Harness { return storeHarness(newRetimes()) },
		caughtBy: []string{
			"Leases/RetryAt/EndedByRecordRetry",
			"Leases/Release/EndedByRecordRetry",
			"Leases/Release/EndedByRelease",
		},
	},
	{
		name:     "MarkDeliveredTwiceIsRefused",
		harness:  func() hookrelaytest.Harness { return storeHarness(&markOnce{Store: memory.NewStore()}) },
		caughtBy: []string{"Leases/MarkDelivered/EndedByMarkDelivered"},
	},
	{
		name:    "EveryRefusalIsLeaseLost",
		harness: func() hookrelaytest.Harness { return storeHarness(&allLeaseLost{Store: memory.NewStore()}) },
		caughtBy: []string{
			"Leases/MarkDelivered/EndedByRecordDeadLetter",
			"Leases/RecordRetry/EndedByRecordDeadLetter",
			"Leases/RecordRetry/EndedByMarkDelivered",
			"Leases/RecordDeadLetter/EndedByMarkDelivered",
		},
	},
	{
		name:    "AcknowledgeLosesAPendingDelivery",
		harness: func() hookrelaytest.Harness { return storeHarness(newAckLoses()) },
		caughtBy: []string{
			"Leases/Acknowledge/Live",
			"Leases/DeadLetter/Live",
		},
	},
	{
		name:    "QueueEntriesApartFromRecordsYetDeclaresLedgerQueue",
		harness: func() hookrelaytest.Harness { return storeHarness(newApart()) },
		caughtBy: []string{
			"LedgerQueue/RecordRetryAloneMakesTheRetryDueAtItsTime",
			"LedgerQueue/MarkDeliveredAndRecordDeadLetterAloneEndTheWork",
			"EngineLedgerQueue/FullJitterAtHalfGives500msThen1s",
		},
	},
	{
		name:     "DeadAgeNegativeWhenDeadLetteredAfterNow",
		harness:  func() hookrelaytest.Harness { return storeHarness(newUnclampedDeadAge()) },
		caughtBy: []string{"Stats/ADeadLetterTimeAfterNowIsAgeZero"},
	},
	{
		name:    "CleanerRemovesDeadLetters",
		harness: func() hookrelaytest.Harness { return storeHarness(&removesDead{Store: memory.NewStore()}) },
		caughtBy: []string{
			"Retention/OnlyDeliveredHistoryPastTheRetentionIsRemoved",
			"Retention/DeadRecordsGoOnlyWhenRemoveDeadSaysSo",
		},
	},
	{
		name:     "CleanerRefusesCutoffsBefore1678",
		harness:  func() hookrelaytest.Harness { return storeHarness(&nanoCutoffs{Store: memory.NewStore()}) },
		caughtBy: []string{"Retention/ACutoffBeforeAnyStorableTimeRemovesNothingAndFailsNot"},
	},
	{
		name:     "CleanerIgnoresTheBatchLimit",
		harness:  func() hookrelaytest.Harness { return storeHarness(&unboundedClean{Store: memory.NewStore()}) },
		caughtBy: []string{"Retention/EachCallIsABoundedBatchOldestFirst"},
	},
	{
		name:     "DryRunRemoves",
		harness:  func() hookrelaytest.Harness { return storeHarness(&dryRunWrites{Store: memory.NewStore()}) },
		caughtBy: []string{"Retention/DryRunCountsByDestinationAndStateAndChangesNothing"},
	},
	{
		name:     "CompactsAttemptDetailsAtOnce",
		harness:  func() hookrelaytest.Harness { return storeHarness(&compactsAtOnce{Store: memory.NewStore()}) },
		caughtBy: []string{"Retention/OldAttemptDetailsAreCompactedIntoASummary"},
	},
	{
		name:     "CleanerCountsDeletedRowsNotRecords",
		harness:  func() hookrelaytest.Harness { return storeHarness(&rowCounter{Store: memory.NewStore()}) },
		caughtBy: []string{"Retention/ConcurrentCleanersRemoveEachRecordOnce"},
	},
	{
		name:    "RecoveryNeverMarksWhatItTook",
		harness: func() hookrelaytest.Harness { return storeHarness(&unmarkedTake{Store: memory.NewStore()}) },
		caughtBy: []string{
			"UnpublishedRecovery/ADueRecordNobodyLeasedIsTakenOncePerGrace",
			"UnpublishedRecovery/ConcurrentCallersTakeEachRecordOnce",
		},
	},
	{
		name:     "RecoveryIgnoresTheGrace",
		harness:  func() hookrelaytest.Harness { return storeHarness(&noGrace{Store: memory.NewStore()}) },
		caughtBy: []string{"UnpublishedRecovery/ADueRecordNobodyLeasedIsTakenOncePerGrace"},
	},
	{
		name:     "RecoveryTakesSkippedDestinations",
		harness:  func() hookrelaytest.Harness { return storeHarness(&takesSkipped{Store: memory.NewStore()}) },
		caughtBy: []string{"UnpublishedRecovery/LeasedFinishedNotDueAndSkippedRecordsAreLeftAlone"},
	},
	{
		name:     "CreateDropsBudgetStart",
		harness:  func() hookrelaytest.Harness { return storeHarness(&dropsBudgetStart{Store: memory.NewStore()}) },
		caughtBy: []string{"Ledger/CreateRoundTripsEveryFieldOfTheRecord"},
	},
	{
		name:     "CreateCleansWhatItCannotStore",
		harness:  func() hookrelaytest.Harness { return storeHarness(&cleans{Store: memory.NewStore()}) },
		caughtBy: []string{"Ledger/RefusesWhatEveryStoreRefuses"},
	},
	{
		name:     "RefusesTextOverAColumn",
		harness:  func() hookrelaytest.Harness { return storeHarness(&refusesLongText{Store: memory.NewStore()}) },
		caughtBy: []string{"Ledger/LongOrMalformedTextIsRecordedAsStorableText"},
	},
	{
		name:     "IgnoresCancelledContexts",
		harness:  func() hookrelaytest.Harness { return storeHarness(&ignoresContext{Store: memory.NewStore()}) },
		caughtBy: []string{"Ledger/CancelledContextIsRefused"},
	},
	{
		name:     "RecentOutcomesIgnoresCancelledContexts",
		harness:  func() hookrelaytest.Harness { return storeHarness(&statsIgnoreContext{Store: memory.NewStore()}) },
		caughtBy: []string{"Ledger/CancelledContextIsRefused"},
	},
	{
		name: "ListDestinationsIgnoresCancelledContexts",
		harness: func() hookrelaytest.Harness {
			h := storeHarness(memory.NewStore())
			h.Destinations = &listIgnoresContext{Destinations: memory.NewDestinations()}
			return h
		},
		caughtBy: []string{"Destinations/CancelledContextIsRefused"},
	},
	{
		name: "DisableOverwritesTheReason",
		harness: func() hookrelaytest.Harness {
			h := storeHarness(memory.NewStore())
			h.Destinations = &disableOverwrites{Destinations: memory.NewDestinations()}
			return h
		},
		caughtBy: []string{"Destinations/DisableKeepsTheFirstReason"},
	},
	{
		name: "PutDropsThePolicy",
		harness: func() hookrelaytest.Harness {
			h := storeHarness(memory.NewStore())
			h.Destinations = &dropsPolicy{Destinations: memory.NewDestinations()}
			return h
		},
		caughtBy: []string{"Destinations/EveryFieldRoundTrips"},
	},
	{
		name: "PutDropsTheRateLimit",
		harness: func() hookrelaytest.Harness {
			h := storeHarness(memory.NewStore())
			h.Destinations = &dropsRate{Destinations: memory.NewDestinations()}
			return h
		},
		caughtBy: []string{"Destinations/EveryFieldRoundTrips"},
	},
	{
		name: "PutCleansABadRateLimit",
		harness: func() hookrelaytest.Harness {
			h := storeHarness(memory.NewStore())
			h.Destinations = &cleansRate{Destinations: memory.NewDestinations()}
			return h
		},
		caughtBy: []string{"Destinations/PutRefusesABadRateLimitAndChangesNothing"},
	},
	{
		name: "PutDropsAHeaderTheSenderCannotSend",
		harness: func() hookrelaytest.Harness {
			h := storeHarness(memory.NewStore())
			h.Destinations = &dropsUnsendableHeaders{Destinations: memory.NewDestinations()}
			return h
		},
		caughtBy: []string{"Destinations/PutRefusesAHeaderTheSenderCannotSendAndChangesNothing"},
	},
	{
		name: "GuardUpdateNotAtomic",
		harness: func() hookrelaytest.Harness {
			h := storeHarness(memory.NewStore())
			h.Destinations = &unlockedGuard{Destinations: memory.NewDestinations()}
			return h
		},
		caughtBy: []string{"DestinationGuard/UpdatesAreAtomic"},
	},
	{
		name: "GuardStatesReadsTheFirstChunkOnly",
		harness: func() hookrelaytest.Harness {
			h := storeHarness(memory.NewStore())
			h.Destinations = &guardFirstChunkOnly{Destinations: memory.NewDestinations()}
			return h
		},
		caughtBy: []string{"DestinationGuard/GuardStatesOfManyIDsAnswersEachStoredStateOnce"},
	},
	{
		name: "UnpublishedHonoursTheFirstSkipChunkOnly",
		harness: func() hookrelaytest.Harness {
			return storeHarness(&unpublishedSkipsFirstChunkOnly{Store: memory.NewStore()})
		},
		caughtBy: []string{"UnpublishedRecovery/ASkipListOfTensOfThousandsIsHonoured"},
	},
	{
		name:     "RateBucketNotKeptInTheStore",
		harness:  func() hookrelaytest.Harness { return guardHarness(bucketPerCall) },
		caughtBy: []string{"DestinationGuard/RateIsHonouredAcrossSeveralWorkers", "DestinationGuard/StateRoundTrips", "DestinationGuard/StartedWorkersHonourTheRate"},
	},
	{
		name:     "RateLimitHeldLongerThanGiven",
		harness:  func() hookrelaytest.Harness { return guardHarness(rateLimitHeldAnHour) },
		caughtBy: []string{"DestinationGuard/ARateRaisedOrRemovedTakesEffectWithinPausedRecheck"},
	},
	{
		name:     "RetryAfterHoldNotStored",
		harness:  func() hookrelaytest.Harness { return guardHarness(holdNotStored) },
		caughtBy: []string{"DestinationGuard/RetryAfterHoldsTheWholeDestinationWithoutSpendingAttempts", "DestinationGuard/StateRoundTrips", "DestinationGuard/StartedWorkerHoldsEveryDeliveryOnRetryAfter"},
	},
	{
		name:     "GuardClearNotStored",
		harness:  func() hookrelaytest.Harness { return guardHarness(holdNeverShortened) },
		caughtBy: []string{"DestinationGuard/AClearedGuardLetsEveryWorkerSendAtOnce"},
	},
	{
		name:     "CircuitNeverHalfOpens",
		harness:  func() hookrelaytest.Harness { return guardHarness(coolDownNeverEnds) },
		caughtBy: []string{"DestinationGuard/CircuitOpensProbesOnceReopensAndCloses", "DestinationGuard/StartedWorkerOpensProbesOnceAndClosesTheCircuit"},
	},
	{
		name:     "CircuitProbeNotKept",
		harness:  func() hookrelaytest.Harness { return guardHarness(probeNotKept) },
		caughtBy: []string{"DestinationGuard/CircuitOpensProbesOnceReopensAndCloses", "DestinationGuard/StateRoundTrips", "DestinationGuard/StartedWorkerOpensProbesOnceAndClosesTheCircuit"},
	},
	{
		name:     "FailingSinceResetByAFailure",
		harness:  func() hookrelaytest.Harness { return guardHarness(failingSinceResetByFailures) },
		caughtBy: []string{"DestinationGuard/DestinationFailingForTheSpanIsDisabled", "DestinationGuard/StateRoundTrips", "DestinationGuard/StartedWorkerDisablesADestinationFailingForTheSpan"},
	},
	{
		name: "GuardStatesReadNothing",
		harness: func() hookrelaytest.Harness {
			h := storeHarness(memory.NewStore())
			h.Destinations = &guardUnread{Destinations: memory.NewDestinations()}
			return h
		},
		caughtBy: []string{"DestinationGuard/StateRoundTrips", "DestinationGuard/StartedWorkerHoldsEveryDeliveryOnRetryAfter"},
	},
	{
		name:    "BatchReadRepeatsRepeatedIDs",
		harness: batchReaderHarness(func(d *memory.Destinations) hookrelaytest.DestinationStore { return &repeatsIDs{d} }),
		caughtBy: []string{
			"DestinationBatchReader/EachDestinationOnceAsDestinationReturnsIt",
			"DestinationBatchReader/ALongListIsReadWhole",
		},
	},
	{
		name:     "BatchReadSkipsPausedAndDisabled",
		harness:  batchReaderHarness(func(d *memory.Destinations) hookrelaytest.DestinationStore { return &skipsSwitchedOff{d} }),
		caughtBy: []string{"DestinationBatchReader/EachDestinationOnceAsDestinationReturnsIt"},
	},
	{
		name:     "DisableRefusesALongReason",
		harness:  batchReaderHarness(func(d *memory.Destinations) hookrelaytest.DestinationStore { return &refusesLongReason{d} }),
		caughtBy: []string{"Destinations/ALongOrMalformedDisabledReasonIsKeptAsStorableText"},
	},
	{
		name:     "PutRefusesWhatABlobCannotHold",
		harness:  batchReaderHarness(func(d *memory.Destinations) hookrelaytest.DestinationStore { return &refusesWideDestination{d} }),
		caughtBy: []string{"Destinations/LargeHeadersSecretsAndURLRoundTrip"},
	},
	{
		name:     "RedriveAuditRefusesManyTenants",
		harness:  func() hookrelaytest.Harness { return storeHarness(&refusesWideAudit{Store: memory.NewStore()}) },
		caughtBy: []string{"Redrive/AnAuditSpanningThousandsOfTenantsIsKeptWhole"},
	},
	{
		name:     "PutKeepsTheFirstSecretsOfTooMany",
		harness:  batchReaderHarness(func(d *memory.Destinations) hookrelaytest.DestinationStore { return &keepsFirstSecrets{d} }),
		caughtBy: []string{"Destinations/PutRefusesMoreSecretsThanEachSendShouldSign"},
	},
	{
		name:     "PutCleansTextItCannotHold",
		harness:  batchReaderHarness(func(d *memory.Destinations) hookrelaytest.DestinationStore { return &cleansText{d} }),
		caughtBy: []string{"Destinations/PutRefusesAURLSecretOrHeaderThatIsNotUTF8"},
	},
	{
		name:     "PutClampsMaxConcurrency",
		harness:  batchReaderHarness(func(d *memory.Destinations) hookrelaytest.DestinationStore { return &clampsConcurrency{d} }),
		caughtBy: []string{"Destinations/PutRefusesAMaxConcurrencyOutOfRangeAndChangesNothing"},
	},
	{
		name:     "AuditForgetsWhoResumed",
		harness:  func() hookrelaytest.Harness { return storeHarness(&forgetsResumer{Store: memory.NewStore()}) },
		caughtBy: []string{"Redrive/StopBetweenBatchesFromAnotherClientThenResume", "Redrive/ResumeIsAuthorizedForWhoResumesIt"},
	},
	{
		name:     "RedriveDeliveryLeavesTheCountToTheCaller",
		harness:  func() hookrelaytest.Harness { return storeHarness(&uncountedRedrive{Store: memory.NewStore()}) },
		caughtBy: []string{"Redrive/RedriveDeliveryCountsItselfInItsAudit", "Redrive/AuditRecordsWhoWhenWhatAndCounts"},
	},
	{
		name:     "AuditForgetsTheRun",
		harness:  func() hookrelaytest.Harness { return storeHarness(&forgetsRun{Store: memory.NewStore()}) },
		caughtBy: []string{"Redrive/AResumeBeforeTheStopIsSeenLeavesOneRun"},
	},
	{
		name:     "BatchReadFoldsCase",
		harness:  batchReaderHarness(func(d *memory.Destinations) hookrelaytest.DestinationStore { return &foldsCase{d} }),
		caughtBy: []string{"DestinationBatchReader/IDsMatchExactly"},
	},
	{
		name:     "BatchReadReadsOneStatementsWorth",
		harness:  batchReaderHarness(func(d *memory.Destinations) hookrelaytest.DestinationStore { return &firstChunkOnly{d} }),
		caughtBy: []string{"DestinationBatchReader/ALongListIsReadWhole"},
	},
	{
		name:    "BatchReadFailsOnAnUnknownID",
		harness: batchReaderHarness(func(d *memory.Destinations) hookrelaytest.DestinationStore { return &failsOnUnknown{d} }),
		caughtBy: []string{
			"DestinationBatchReader/EachDestinationOnceAsDestinationReturnsIt",
			"DestinationBatchReader/UnknownIDsAreLeftOutWithoutAnError",
		},
	},
	{
		name:     "BatchReadIgnoresACancelledContext",
		harness:  batchReaderHarness(func(d *memory.Destinations) hookrelaytest.DestinationStore { return &batchIgnoresContext{d} }),
		caughtBy: []string{"DestinationBatchReader/CancelledContextIsRefused"},
	},
	{
		name:     "UnknownDestinationNamedUnquoted",
		harness:  batchReaderHarness(func(d *memory.Destinations) hookrelaytest.DestinationStore { return &rawIDInError{d} }),
		caughtBy: []string{"UnstorableIDs/Destinations"},
	},
	{
		name:     "UnstorableIDIsAStoreFailure",
		harness:  func() hookrelaytest.Harness { return storeHarness(&refusesUnstorableIDs{Store: memory.NewStore()}) },
		caughtBy: []string{"UnstorableIDs/Ledger"},
	},
	{
		name:     "TimesEndIn2038",
		harness:  func() hookrelaytest.Harness { return storeHarness(&timesEndIn2038{Store: memory.NewStore()}) },
		caughtBy: []string{"Engine/RetryAfterBeyondWhatAStoreCanHoldIsStillRecorded"},
	},
}

// brokenStoreEnv names the broken store TestBrokenStore runs the suite on.
const brokenStoreEnv = "HOOKRELAYTEST_BROKEN_STORE"

// TestBrokenStore runs the whole suite on the store named by
// HOOKRELAYTEST_BROKEN_STORE ("Memory": the unbroken memory store). It only
// runs as TestSuiteCatchesBrokenStores's child process.
func TestBrokenStore(t *testing.T) {
	name := os.Getenv(brokenStoreEnv)
	if name == "" {
		t.Skip("run by TestSuiteCatchesBrokenStores")
	}
	newHarness := func() hookrelaytest.Harness { return storeHarness(memory.NewStore()) }
	switch name {
	case "Memory":
	case announcingControl:
		newHarness = func() hookrelaytest.Harness { return newAnnouncingStore(dueCorrect).harness() }
	default:
		all := slices.Concat(brokenStores, brokenNotifiers)
		i := slices.IndexFunc(all, func(b brokenStore) bool { return b.name == name })
		if i < 0 {
			t.Fatalf("unknown broken store %q", name)
		}
		newHarness = all[i].harness
	}
	hookrelaytest.Run(t, func(*testing.T) hookrelaytest.Harness { return newHarness() })
}

// runSuite runs the suite cases at paths on the named store in a child
// process (a failing case fails its test, which this process must not) and
// returns whether it passed and its output.
func runSuite(t *testing.T, store string, paths ...string) (bool, string) {
	t.Helper()
	// One alternation per level of the paths; the unbroken control run
	// may run a few more cases than listed, all of which must pass.
	var levels [][]string
	for _, p := range paths {
		for i, part := range strings.Split(p, "/") {
			if i == len(levels) {
				levels = append(levels, nil)
			}
			if !slices.Contains(levels[i], part) {
				levels[i] = append(levels[i], part)
			}
		}
	}
	pattern := "^TestBrokenStore$"
	for _, l := range levels {
		pattern += "/^(" + strings.Join(l, "|") + ")$"
	}
	cmd := exec.Command(os.Args[0], "-test.run", pattern, "-test.v", "-test.count=1")
	cmd.Env = append(os.Environ(), brokenStoreEnv+"="+store)
	out, err := cmd.CombinedOutput()
	return err == nil, string(out)
}

// TestSuiteCatchesBrokenStores shows that every case the contract added
// rejects a store that breaks its rule: each broken store fails each case
// listed for it, and the unbroken memory store passes them all.
func TestSuiteCatchesBrokenStores(t *testing.T) {
	runCatches(t, brokenStores, "Memory")
}

// runCatches runs each broken store's listed cases, which must fail, and
// then every listed case on the unbroken store named control ("Memory", or
// announcingControl), which must pass them all.
func runCatches(t *testing.T, brokenStores []brokenStore, control string) {
	if os.Getenv(brokenStoreEnv) != "" {
		t.Skip("the child process runs TestBrokenStore only")
	}
	var all []string
	for _, b := range brokenStores {
		t.Run(b.name, func(t *testing.T) {
			passed, out := runSuite(t, b.name, b.caughtBy...)
			if !assert.False(t, passed, "the suite passed the broken store") {
				return
			}
			for _, p := range b.caughtBy {
				assert.Contains(t, out, "--- FAIL: TestBrokenStore/"+p+" ", "the case %s failed on the broken store", p)
			}
		})
		all = append(all, b.caughtBy...)
	}
	t.Run(control+"PassesEveryCase", func(t *testing.T) {
		passed, out := runSuite(t, control, all...)
		assert.True(t, passed, "the unbroken %s store fails a case:\n%s", control, out)
		for _, p := range all {
			assert.Contains(t, out, "--- PASS: TestBrokenStore/"+p+" ", "the case %s ran and passed", p)
		}
	})
}

// requeueing re-queues whatever Enqueue is given at the given record's
// NextAttemptAt, as a sorted set keyed by delivery ID would (ZADD): a
// record it already holds is left as is, anything else comes back.
type requeueing struct {
	*memory.Store
	mu    sync.Mutex
	queue map[string]hookrelay.Delivery
	token int64
}

func newRequeueing() *requeueing {
	return &requeueing{Store: memory.NewStore(), queue: map[string]hookrelay.Delivery{}, token: 1 << 40}
}

func (s *requeueing) Enqueue(ctx context.Context, ds []hookrelay.Delivery) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, d := range ds {
		s.queue[d.ID] = d
	}
	return s.Store.Enqueue(ctx, ds)
}

func (s *requeueing) Claim(ctx context.Context, p hookrelay.ClaimParams) ([]hookrelay.Claim, error) {
	cs, err := s.Store.Claim(ctx, p)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, c := range cs {
		delete(s.queue, c.Delivery.ID)
	}
	for id, d := range s.queue {
		if len(cs) < p.Limit && !d.NextAttemptAt.After(p.Now) && !slices.Contains(p.SkipDestinations, d.DestinationID) {
			s.token++
			cs = append(cs, hookrelay.Claim{Delivery: d, Lease: hookrelay.Lease{Token: s.token, Holder: p.Holder, ExpiresAt: p.Now.Add(p.LeaseFor)}})
			delete(s.queue, id)
		}
	}
	return cs, nil
}

// tokenReset keeps a fencing token with the lease, counting claims since the
// lease last ended, and resets it when a write or transition ends the
// lease: after expire → claim → release → claim, the first holder's token
// equals the live one.
type tokenReset struct {
	*memory.Store
	mu    sync.Mutex
	since map[string]int64
	real  map[string]map[int64]int64 // presented → memory's token
	// perRecord: the count is the record's own, from 0 when it is created
	// (as a SQL row's column defaulting to 0), not reset when a lease ends.
	// A record removed by the cleaner and created again under its ID
	// starts over: the removed record's last holders present tokens the
	// new record's live lease has.
	perRecord bool
}

func newTokenReset() *tokenReset {
	return &tokenReset{Store: memory.NewStore(), since: map[string]int64{}, real: map[string]map[int64]int64{}}
}

func newTokenPerRecord() *tokenReset {
	s := newTokenReset()
	s.perRecord = true
	return s
}

func (s *tokenReset) Create(ctx context.Context, ds []hookrelay.Delivery) ([]bool, error) {
	created, err := s.Store.Create(ctx, ds)
	if s.perRecord && err == nil {
		s.mu.Lock()
		for i, d := range ds {
			if created[i] {
				s.since[d.ID], s.real[d.ID] = 0, map[int64]int64{}
			}
		}
		s.mu.Unlock()
	}
	return created, err
}

func (s *tokenReset) hand(c hookrelay.Claim) hookrelay.Claim {
	s.mu.Lock()
	defer s.mu.Unlock()
	id := c.Delivery.ID
	s.since[id]++
	if s.real[id] == nil {
		s.real[id] = map[int64]int64{}
	}
	s.real[id][s.since[id]] = c.Lease.Token
	c.Lease.Token = s.since[id]
	return c
}

func (s *tokenReset) lease(id string, l hookrelay.Lease) hookrelay.Lease {
	s.mu.Lock()
	defer s.mu.Unlock()
	l.Token = s.real[id][l.Token]
	return l
}

func (s *tokenReset) ended(id string, err error) error {
	if err == nil && !s.perRecord {
		s.mu.Lock()
		s.since[id] = 0
		s.mu.Unlock()
	}
	return err
}

func (s *tokenReset) Claim(ctx context.Context, p hookrelay.ClaimParams) ([]hookrelay.Claim, error) {
	cs, err := s.Store.Claim(ctx, p)
	for i := range cs {
		cs[i] = s.hand(cs[i])
	}
	return cs, err
}

func (s *tokenReset) AcquireLease(ctx context.Context, p hookrelay.AcquireLeaseParams) (hookrelay.Claim, error) {
	c, err := s.Store.AcquireLease(ctx, p)
	if err != nil {
		return c, err
	}
	return s.hand(c), nil
}

func (s *tokenReset) MarkDelivered(ctx context.Context, p hookrelay.MarkDeliveredParams) error {
	p.Lease = s.lease(p.ID, p.Lease)
	return s.ended(p.ID, s.Store.MarkDelivered(ctx, p))
}

func (s *tokenReset) RecordRetry(ctx context.Context, p hookrelay.RecordRetryParams) error {
	p.Lease = s.lease(p.ID, p.Lease)
	return s.ended(p.ID, s.Store.RecordRetry(ctx, p))
}

func (s *tokenReset) RecordDeadLetter(ctx context.Context, p hookrelay.RecordDeadLetterParams) error {
	p.Lease = s.lease(p.ID, p.Lease)
	return s.ended(p.ID, s.Store.RecordDeadLetter(ctx, p))
}

func (s *tokenReset) Acknowledge(ctx context.Context, p hookrelay.AckParams) error {
	p.Lease = s.lease(p.ID, p.Lease)
	return s.ended(p.ID, s.Store.Acknowledge(ctx, p))
}

func (s *tokenReset) RetryAt(ctx context.Context, p hookrelay.RetryAtParams) error {
	p.Lease = s.lease(p.Delivery.ID, p.Lease)
	return s.ended(p.Delivery.ID, s.Store.RetryAt(ctx, p))
}

func (s *tokenReset) DeadLetter(ctx context.Context, p hookrelay.DeadLetterParams) error {
	p.Lease = s.lease(p.Delivery.ID, p.Lease)
	return s.ended(p.Delivery.ID, s.Store.DeadLetter(ctx, p))
}

func (s *tokenReset) Release(ctx context.Context, p hookrelay.ReleaseParams) error {
	p.Lease = s.lease(p.ID, p.Lease)
	return s.ended(p.ID, s.Store.Release(ctx, p))
}

func (s *tokenReset) ReleaseLease(ctx context.Context, p hookrelay.ReleaseLeaseParams) error {
	p.Lease = s.lease(p.ID, p.Lease)
	return s.ended(p.ID, s.Store.ReleaseLease(ctx, p))
}

// writesAfterRelease forgets that Release ended a lease: a later ledger
// write with that token still lands (on a lease it takes afresh).
type writesAfterRelease struct {
	*memory.Store
	mu       sync.Mutex
	released map[string]int64
}

func newWritesAfterRelease() *writesAfterRelease {
	return &writesAfterRelease{Store: memory.NewStore(), released: map[string]int64{}}
}

func (s *writesAfterRelease) Release(ctx context.Context, p hookrelay.ReleaseParams) error {
	err := s.Store.Release(ctx, p)
	if err == nil {
		s.mu.Lock()
		s.released[p.ID] = p.Lease.Token
		s.mu.Unlock()
	}
	return err
}

func (s *writesAfterRelease) relet(ctx context.Context, id string, l hookrelay.Lease, now time.Time) hookrelay.Lease {
	s.mu.Lock()
	released := s.released[id] == l.Token
	s.mu.Unlock()
	if released {
		if c, err := s.Store.AcquireLease(ctx, hookrelay.AcquireLeaseParams{ID: id, Now: now, LeaseFor: time.Minute}); err == nil {
			return c.Lease
		}
	}
	return l
}

func (s *writesAfterRelease) MarkDelivered(ctx context.Context, p hookrelay.MarkDeliveredParams) error {
	p.Lease = s.relet(ctx, p.ID, p.Lease, p.Now)
	return s.Store.MarkDelivered(ctx, p)
}

func (s *writesAfterRelease) RecordRetry(ctx context.Context, p hookrelay.RecordRetryParams) error {
	p.Lease = s.relet(ctx, p.ID, p.Lease, p.Now)
	return s.Store.RecordRetry(ctx, p)
}

func (s *writesAfterRelease) RecordDeadLetter(ctx context.Context, p hookrelay.RecordDeadLetterParams) error {
	p.Lease = s.relet(ctx, p.ID, p.Lease, p.Now)
	return s.Store.RecordDeadLetter(ctx, p)
}

// timeFenced refuses a write once the lease's expiry passed, even though
// no one claimed the delivery since: fencing by clock instead of by token.
type timeFenced struct{ *memory.Store }

func (s *timeFenced) MarkDelivered(ctx context.Context, p hookrelay.MarkDeliveredParams) error {
	if !p.Now.Before(p.Lease.ExpiresAt) {
		return hookrelay.ErrLeaseLost
	}
	return s.Store.MarkDelivered(ctx, p)
}

func (s *timeFenced) RecordRetry(ctx context.Context, p hookrelay.RecordRetryParams) error {
	if !p.Now.Before(p.Lease.ExpiresAt) {
		return hookrelay.ErrLeaseLost
	}
	return s.Store.RecordRetry(ctx, p)
}

func (s *timeFenced) RecordDeadLetter(ctx context.Context, p hookrelay.RecordDeadLetterParams) error {
	if !p.Now.Before(p.Lease.ExpiresAt) {
		return hookrelay.ErrLeaseLost
	}
	return s.Store.RecordDeadLetter(ctx, p)
}

// tokenBlind writes and ends whatever lease a delivery has, whichever token
// the caller presents.
type tokenBlind struct {
	*memory.Store
	mu      sync.Mutex
	current map[string]int64
}

func newTokenBlind() *tokenBlind {
	return &tokenBlind{Store: memory.NewStore(), current: map[string]int64{}}
}

func (s *tokenBlind) Claim(ctx context.Context, p hookrelay.ClaimParams) ([]hookrelay.Claim, error) {
	cs, err := s.Store.Claim(ctx, p)
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, c := range cs {
		s.current[c.Delivery.ID] = c.Lease.Token
	}
	return cs, err
}

func (s *tokenBlind) lease(id string, l hookrelay.Lease) hookrelay.Lease {
	s.mu.Lock()
	defer s.mu.Unlock()
	l.Token = s.current[id]
	return l
}

func (s *tokenBlind) MarkDelivered(ctx context.Context, p hookrelay.MarkDeliveredParams) error {
	p.Lease = s.lease(p.ID, p.Lease)
	return s.Store.MarkDelivered(ctx, p)
}

func (s *tokenBlind) RecordRetry(ctx context.Context, p hookrelay.RecordRetryParams) error {
	p.Lease = s.lease(p.ID, p.Lease)
	return s.Store.RecordRetry(ctx, p)
}

func (s *tokenBlind) RecordDeadLetter(ctx context.Context, p hookrelay.RecordDeadLetterParams) error {
	p.Lease = s.lease(p.ID, p.Lease)
	return s.Store.RecordDeadLetter(ctx, p)
}

func (s *tokenBlind) Acknowledge(ctx context.Context, p hookrelay.AckParams) error {
	p.Lease = s.lease(p.ID, p.Lease)
	return s.Store.Acknowledge(ctx, p)
}

func (s *tokenBlind) RetryAt(ctx context.Context, p hookrelay.RetryAtParams) error {
	p.Lease = s.lease(p.Delivery.ID, p.Lease)
	return s.Store.RetryAt(ctx, p)
}

func (s *tokenBlind) DeadLetter(ctx context.Context, p hookrelay.DeadLetterParams) error {
	p.Lease = s.lease(p.Delivery.ID, p.Lease)
	return s.Store.DeadLetter(ctx, p)
}

func (s *tokenBlind) Release(ctx context.Context, p hookrelay.ReleaseParams) error {
	p.Lease = s.lease(p.ID, p.Lease)
	return s.Store.Release(ctx, p)
}

func (s *tokenBlind) ReleaseLease(ctx context.Context, p hookrelay.ReleaseLeaseParams) error {
	p.Lease = s.lease(p.ID, p.Lease)
	return s.Store.ReleaseLease(ctx, p)
}

// ackLoses drops a delivery from its queue on Acknowledge or DeadLetter
// even when the ledger still says pending (the old memory store's bug).
type ackLoses struct {
	*memory.Store
	mu   sync.Mutex
	lost map[string]bool
}

func newAckLoses() *ackLoses { return &ackLoses{Store: memory.NewStore(), lost: map[string]bool{}} }

func (s *ackLoses) lose(ctx context.Context, id string, err error) error {
	if err == nil {
		if d, gerr := s.Store.Get(ctx, id); gerr == nil && d.State == hookrelay.StatePending {
			s.mu.Lock()
			s.lost[id] = true
			s.mu.Unlock()
		}
	}
	return err
}

func (s *ackLoses) Acknowledge(ctx context.Context, p hookrelay.AckParams) error {
	return s.lose(ctx, p.ID, s.Store.Acknowledge(ctx, p))
}

func (s *ackLoses) DeadLetter(ctx context.Context, p hookrelay.DeadLetterParams) error {
	return s.lose(ctx, p.Delivery.ID, s.Store.DeadLetter(ctx, p))
}

func (s *ackLoses) Claim(ctx context.Context, p hookrelay.ClaimParams) ([]hookrelay.Claim, error) {
	cs, err := s.Store.Claim(ctx, p)
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.DeleteFunc(cs, func(c hookrelay.Claim) bool { return s.lost[c.Delivery.ID] }), err
}

// apart keeps its queue entries apart from the ledger records, as a broker
// does — a claimed entry comes back when its lease expires unless a queue
// transition ended it — yet declares LedgerQueue (by embedding the memory
// store), so the worker skips the transitions it needs.
type apart struct {
	*memory.Store
	mu   sync.Mutex
	held map[string]hookrelay.Claim
}

func newApart() *apart { return &apart{Store: memory.NewStore(), held: map[string]hookrelay.Claim{}} }

func (s *apart) Claim(ctx context.Context, p hookrelay.ClaimParams) ([]hookrelay.Claim, error) {
	cs, err := s.Store.Claim(ctx, p)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []hookrelay.Claim
	for _, c := range cs {
		if h, ok := s.held[c.Delivery.ID]; ok && h.Lease.ExpiresAt.After(p.Now) {
			continue // the entry is still out with its first holder
		}
		s.held[c.Delivery.ID] = c
		out = append(out, c)
	}
	for id, h := range s.held {
		if len(out) < p.Limit && !h.Lease.ExpiresAt.After(p.Now) && !slices.ContainsFunc(out, func(c hookrelay.Claim) bool { return c.Delivery.ID == id }) {
			h.Lease.ExpiresAt = p.Now.Add(p.LeaseFor)
			s.held[id] = h
			out = append(out, h) // redelivered after its ack wait
		}
	}
	return out, nil
}

func (s *apart) end(id string) {
	s.mu.Lock()
	delete(s.held, id)
	s.mu.Unlock()
}

func (s *apart) Acknowledge(ctx context.Context, p hookrelay.AckParams) error {
	s.end(p.ID)
	return s.Store.Acknowledge(ctx, p)
}

func (s *apart) RetryAt(ctx context.Context, p hookrelay.RetryAtParams) error {
	s.end(p.Delivery.ID)
	return s.Store.RetryAt(ctx, p)
}

func (s *apart) DeadLetter(ctx context.Context, p hookrelay.DeadLetterParams) error {
	s.end(p.Delivery.ID)
	return s.Store.DeadLetter(ctx, p)
}

func (s *apart) Release(ctx context.Context, p hookrelay.ReleaseParams) error {
	s.end(p.ID)
	return s.Store.Release(ctx, p)
}

// refusesLongText refuses a write whose reason or detail is over what a
// MySQL BLOB holds, as the SQL store once did ("Data too long for
// column"), instead of keeping the text cut.
type refusesLongText struct{ *memory.Store }

func tooLong(texts ...string) error {
	for _, t := range texts {
		if len(t) > hookrelay.MaxStoredTextBytes {
			return errors.New("data too long for column")
		}
	}
	return nil
}

func (s *refusesLongText) RecordRetry(ctx context.Context, p hookrelay.RecordRetryParams) error {
	if err := tooLong(p.Attempt.Reason, p.Attempt.Detail); err != nil {
		return err
	}
	return s.Store.RecordRetry(ctx, p)
}

func (s *refusesLongText) MarkDelivered(ctx context.Context, p hookrelay.MarkDeliveredParams) error {
	if err := tooLong(p.Attempt.Reason, p.Attempt.Detail); err != nil {
		return err
	}
	return s.Store.MarkDelivered(ctx, p)
}

// refusesWideAudit refuses an audit whose tenants, as JSON, are over
// what a MySQL BLOB holds, as schema version 10 on MySQL did.
type refusesWideAudit struct{ *memory.Store }

func (s *refusesWideAudit) CreateRedriveAudit(ctx context.Context, a hookrelay.RedriveAudit) error {
	if err := tooLong(`["` + strings.Join(a.Tenants, `","`) + `"]`); err != nil {
		return err
	}
	return s.Store.CreateRedriveAudit(ctx, a)
}

// forgetsResumer does not record who resumed a redrive.
type forgetsResumer struct{ *memory.Store }

func (s *forgetsResumer) UpdateRedriveAudit(ctx context.Context, u hookrelay.RedriveAuditUpdate) (hookrelay.RedriveAudit, error) {
	u.ResumedBy = ""
	return s.Store.UpdateRedriveAudit(ctx, u)
}

// forgetsRun does not count a redrive's runs: a resume does not step Run.
type forgetsRun struct{ *memory.Store }

func (s *forgetsRun) UpdateRedriveAudit(ctx context.Context, u hookrelay.RedriveAuditUpdate) (hookrelay.RedriveAudit, error) {
	u.NewRun = false
	return s.Store.UpdateRedriveAudit(ctx, u)
}

// uncountedRedrive moves a dead letter without counting the move in the
// redrive's audit entry, leaving that to an update after the batch.
type uncountedRedrive struct{ *memory.Store }

func (s *uncountedRedrive) RedriveDelivery(ctx context.Context, p hookrelay.RedriveDeliveryParams) (hookrelay.Delivery, bool, error) {
	p.AuditID = ""
	return s.Store.RedriveDelivery(ctx, p)
}

// dropsBudgetStart does not store BudgetStart at Create.
type dropsBudgetStart struct{ *memory.Store }

func (s *dropsBudgetStart) Create(ctx context.Context, ds []hookrelay.Delivery) ([]bool, error) {
	ds = slices.Clone(ds)
	for i := range ds {
		ds[i].BudgetStart = 0
	}
	return s.Store.Create(ctx, ds)
}

// cleans stores what it cannot hold in a cleaned-up form instead of
// refusing it.
type cleans struct{ *memory.Store }

func (s *cleans) Create(ctx context.Context, ds []hookrelay.Delivery) ([]bool, error) {
	clean := func(v string) string {
		v = strings.ReplaceAll(strings.ToValidUTF8(v, "?"), "\x00", "")
		if len(v) > hookrelay.MaxStoredStringBytes {
			v = v[:hookrelay.MaxStoredStringBytes]
		}
		return v
	}
	ds = slices.Clone(ds)
	for i := range ds {
		d := &ds[i]
		d.ID, d.EventID, d.TenantID, d.DestinationID, d.EventType = clean(d.ID), clean(d.EventID), clean(d.TenantID), clean(d.DestinationID), clean(d.EventType)
		if d.ID == "" {
			d.ID = "whd_generated"
		}
		scope := map[string]string{}
		for k, v := range d.Scope {
			scope[clean(k)] = clean(v)
		}
		d.Scope = scope
		d.EnvelopeVersion = min(d.EnvelopeVersion, hookrelay.EnvelopeVersion)
		d.NextAttemptAt = d.NextAttemptAt.Round(0)
		if d.NextAttemptAt.Year() > 2262 {
			d.NextAttemptAt = d.FirstQueuedAt
		}
	}
	return s.Store.Create(ctx, ds)
}

// ignoresContext does not look at its context, as the memory store once did.
type ignoresContext struct{ *memory.Store }

func (s *ignoresContext) Create(ctx context.Context, ds []hookrelay.Delivery) ([]bool, error) {
	return s.Store.Create(context.WithoutCancel(ctx), ds)
}

func (s *ignoresContext) Get(ctx context.Context, id string) (hookrelay.Delivery, error) {
	return s.Store.Get(context.WithoutCancel(ctx), id)
}

// statsIgnoreContext is otherwise context-aware but, as the memory store
// once did, counts recent outcomes whatever its context says.
type statsIgnoreContext struct{ *memory.Store }

func (s *statsIgnoreContext) RecentOutcomes(ctx context.Context, p hookrelay.RecentOutcomesParams) ([]hookrelay.OutcomeCount, error) {
	return s.Store.RecentOutcomes(context.WithoutCancel(ctx), p)
}

// listIgnoresContext lists destinations whatever its context says, as the
// memory store once did.
type listIgnoresContext struct{ *memory.Destinations }

func (s *listIgnoresContext) ListDestinations(ctx context.Context) ([]hookrelay.DestinationStatus, error) {
	return s.Destinations.ListDestinations(context.WithoutCancel(ctx))
}

// disableOverwrites records the latest reason on every Disable.
type disableOverwrites struct{ *memory.Destinations }

func (s *disableOverwrites) Disable(ctx context.Context, p hookrelay.DisableParams) error {
	d, err := s.Destination(ctx, p.ID)
	if err != nil {
		return err
	}
	d.Disabled, d.DisabledReason = true, p.Reason
	return s.Put(ctx, d)
}

// dropsPolicy does not store a destination's policy override.
type dropsPolicy struct{ *memory.Destinations }

func (s *dropsPolicy) Put(ctx context.Context, d hookrelay.Destination) error {
	d.Policy = nil
	return s.Destinations.Put(ctx, d)
}

// dropsRate does not store a destination's MaxPerSecond.
type dropsRate struct{ *memory.Destinations }

func (s *dropsRate) Put(ctx context.Context, d hookrelay.Destination) error {
	d.MaxPerSecond = 0
	return s.Destinations.Put(ctx, d)
}

// cleansRate stores a bad MaxPerSecond as no limit instead of refusing it.
type cleansRate struct{ *memory.Destinations }

func (s *cleansRate) Put(ctx context.Context, d hookrelay.Destination) error {
	if d.MaxPerSecond < 0 || math.IsNaN(d.MaxPerSecond) || math.IsInf(d.MaxPerSecond, 0) {
		d.MaxPerSecond = 0
	}
	return s.Destinations.Put(ctx, d)
}

// dropsUnsendableHeaders stores a destination without the headers the
// sender cannot send instead of refusing it, as the HTTP sender does when
// it sends one stored before stores refused them.
type dropsUnsendableHeaders struct{ *memory.Destinations }

func (s *dropsUnsendableHeaders) Put(ctx context.Context, d hookrelay.Destination) error {
	d.Headers = maps.Clone(d.Headers)
	maps.DeleteFunc(d.Headers, func(name, value string) bool {
		return hookrelay.ValidateHeaders(map[string]string{name: value}) != nil
	})
	return s.Destinations.Put(ctx, d)
}

// retimes lets RetryAt and Release set the due time of a pending delivery
// whose lease already ended, as the memory store once did: the write or
// release that ended the lease no longer decides when it runs.
type retimes struct {
	*memory.Store
	mu  sync.Mutex
	due map[string]time.Time
}

func newRetimes() *retimes { return &retimes{Store: memory.NewStore(), due: map[string]time.Time{}} }

func (s *retimes) retime(ctx context.Context, id string, at time.Time, err error) error {
	if err == nil {
		if d, gerr := s.Store.Get(ctx, id); gerr == nil && d.State == hookrelay.StatePending {
			s.mu.Lock()
			s.due[id] = at
			s.mu.Unlock()
		}
	}
	return err
}

func (s *retimes) RetryAt(ctx context.Context, p hookrelay.RetryAtParams) error {
	return s.retime(ctx, p.Delivery.ID, p.At, s.Store.RetryAt(ctx, p))
}

func (s *retimes) Release(ctx context.Context, p hookrelay.ReleaseParams) error {
	return s.retime(ctx, p.ID, p.At, s.Store.Release(ctx, p))
}

func (s *retimes) Get(ctx context.Context, id string) (hookrelay.Delivery, error) {
	d, err := s.Store.Get(ctx, id)
	s.mu.Lock()
	defer s.mu.Unlock()
	if at, ok := s.due[id]; ok && err == nil && d.State == hookrelay.StatePending {
		d.NextAttemptAt = at
	}
	return d, err
}

func (s *retimes) Claim(ctx context.Context, p hookrelay.ClaimParams) ([]hookrelay.Claim, error) {
	cs, err := s.Store.Claim(ctx, p)
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, c := range cs {
		delete(s.due, c.Delivery.ID)
	}
	return cs, err
}

// markOnce refuses to mark a delivered record delivered again.
type markOnce struct{ *memory.Store }

func (s *markOnce) MarkDelivered(ctx context.Context, p hookrelay.MarkDeliveredParams) error {
	if d, err := s.Store.Get(ctx, p.ID); err == nil && d.State == hookrelay.StateDelivered {
		return hookrelay.ErrInvalidState
	}
	return s.Store.MarkDelivered(ctx, p)
}

// allLeaseLost answers every refused write with ErrLeaseLost, so a broker
// queue redelivers, forever, a message it should drop (ErrInvalidState).
type allLeaseLost struct{ *memory.Store }

func leaseLost(err error) error {
	if errors.Is(err, hookrelay.ErrInvalidState) {
		return hookrelay.ErrLeaseLost
	}
	return err
}

func (s *allLeaseLost) MarkDelivered(ctx context.Context, p hookrelay.MarkDeliveredParams) error {
	return leaseLost(s.Store.MarkDelivered(ctx, p))
}

func (s *allLeaseLost) RecordRetry(ctx context.Context, p hookrelay.RecordRetryParams) error {
	return leaseLost(s.Store.RecordRetry(ctx, p))
}

func (s *allLeaseLost) RecordDeadLetter(ctx context.Context, p hookrelay.RecordDeadLetterParams) error {
	return leaseLost(s.Store.RecordDeadLetter(ctx, p))
}

// unclampedDeadAge reports OldestDeadAge as Now minus the earliest
// dead-letter time even when that time is after Now, as the SQL store
// once did: a negative age.
type unclampedDeadAge struct {
	*memory.Store
	mu     sync.Mutex
	deadAt map[string]time.Time // by destination: the earliest dead-letter time
	dest   map[string]string    // by delivery
}

func newUnclampedDeadAge() *unclampedDeadAge {
	return &unclampedDeadAge{Store: memory.NewStore(), deadAt: map[string]time.Time{}, dest: map[string]string{}}
}

func (s *unclampedDeadAge) Create(ctx context.Context, ds []hookrelay.Delivery) ([]bool, error) {
	s.mu.Lock()
	for _, d := range ds {
		s.dest[d.ID] = d.DestinationID
	}
	s.mu.Unlock()
	return s.Store.Create(ctx, ds)
}

func (s *unclampedDeadAge) RecordDeadLetter(ctx context.Context, p hookrelay.RecordDeadLetterParams) error {
	if err := s.Store.RecordDeadLetter(ctx, p); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if at, ok := s.deadAt[s.dest[p.ID]]; !ok || p.Now.Before(at) {
		s.deadAt[s.dest[p.ID]] = p.Now
	}
	return nil
}

func (s *unclampedDeadAge) Stats(ctx context.Context, p hookrelay.StatsParams) ([]hookrelay.DestinationStats, error) {
	st, err := s.Store.Stats(ctx, p)
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := range st {
		if at, ok := s.deadAt[st[i].DestinationID]; ok && st[i].Dead > 0 {
			st[i].OldestDeadAge = p.Now.Sub(at)
		}
	}
	return st, err
}

// nanoCutoffs encodes each cleaner cutoff, Now minus a retention, as int64
// nanoseconds since 1970 and refuses one before 1678, as the SQL store
// once did.
type nanoCutoffs struct{ *memory.Store }

func (s *nanoCutoffs) CleanHistory(ctx context.Context, p hookrelay.CleanHistoryParams) (hookrelay.CleanHistoryResult, error) {
	for _, keep := range []time.Duration{p.Policy.Delivered, p.Policy.AttemptDetails, p.Policy.Dead} {
		if cutoff := p.Now.Add(-keep); cutoff.Before(time.Unix(0, math.MinInt64)) {
			return hookrelay.CleanHistoryResult{}, fmt.Errorf("cutoff %v is outside the storable range", cutoff)
		}
	}
	return s.Store.CleanHistory(ctx, p)
}

// timesEndIn2038 keeps a retry's time as 32-bit Unix seconds, as a MySQL
// TIMESTAMP column does, and refuses a retry due after January 2038 that
// the contract's int64 nanoseconds (up to 2262) hold.
type timesEndIn2038 struct{ *memory.Store }

func (s *timesEndIn2038) RecordRetry(ctx context.Context, p hookrelay.RecordRetryParams) error {
	if p.NextAttemptAt.Unix() > math.MaxInt32 {
		return fmt.Errorf("next_attempt_at %s is past 2038", p.NextAttemptAt.Format(time.RFC3339))
	}
	return s.Store.RecordRetry(ctx, p)
}

// unpublishedSkipsFirstChunkOnly honours the first 512 destinations of
// the skip list only, as a store binding a statement per chunk of the
// list but checking only the first would.
type unpublishedSkipsFirstChunkOnly struct{ *memory.Store }

func (s *unpublishedSkipsFirstChunkOnly) TakeUnpublished(ctx context.Context, p hookrelay.RecoverUnpublishedParams) ([]hookrelay.Delivery, error) {
	p.SkipDestinations = p.SkipDestinations[:min(len(p.SkipDestinations), 512)]
	return s.Store.TakeUnpublished(ctx, p)
}
