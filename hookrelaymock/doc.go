// Package hookrelaymock holds gomock mocks of hookrelay's ports (Queue,
// Ledger, Sender, Destinations, Observer, Authorizer) and of their optional
// abilities: of a Ledger, BatchLedger, LeaseLedger (the broker queues'
// port), LeaseBatchLedger, UnpublishedRecovery, DeadLetterLedger, RedriveAuditLog,
// RedriveLedger (the two together), RedriveAuditLister, LedgerStats,
// AttemptStats and HistoryCleaner; of a Queue, ClaimsByDestinationRoom,
// LedgerQueue, DueNotifier and MessageLimit; of Destinations, DestinationFinder,
// DestinationBatchReader, DestinationEnabler, DestinationLister,
// DestinationPauser and DestinationGuard. They are generated with go.uber.org/mock's mockgen.
// Use them to assert call order, e.g. that the ledger write comes before
// the queue acknowledgement; use the memory adapters when you need a
// working fake.
package hookrelaymock

//go:generate go run go.uber.org/mock/mockgen -destination=ports.go -package=hookrelaymock github.com/hookrelay/hookrelay Queue,Ledger,Sender,Destinations,Observer,LedgerStats,AttemptStats,LeaseLedger,DeadLetterLedger,RedriveAuditLog,RedriveLedger,RedriveAuditLister,DestinationPauser,DestinationEnabler,DestinationLister,DestinationFinder,Authorizer,LedgerQueue,BatchLedger,ClaimsByDestinationRoom,DueNotifier,HistoryCleaner,UnpublishedRecovery,DestinationGuard,LeaseBatchLedger,DestinationBatchReader,MessageLimit
