// Package hookrelaymock holds gomock mocks of hookrelay's ports (Queue,
// Ledger, Sender, Destinations, Observer) and optional abilities
// (LedgerStats, AttemptStats, LeaseLedger, DeadLetterLedger,
// RedriveAuditLog, RedriveAuditLister, DestinationPauser,
// DestinationEnabler, DestinationLister, DestinationFinder, LedgerQueue,
// BatchLedger, ClaimsByDestinationRoom, DueNotifier, HistoryCleaner,
// UnpublishedRecovery, Authorizer), generated
// with go.uber.org/mock's mockgen. Use them to assert call order, e.g. that
// the ledger write comes before the queue acknowledgement; use the memory
// adapters when you need a working fake.
package hookrelaymock

//go:generate mockgen -destination=ports.go -package=hookrelaymock github.com/hookrelay/hookrelay Queue,Ledger,Sender,Destinations,Observer,LedgerStats,AttemptStats,LeaseLedger,DeadLetterLedger,RedriveAuditLog,RedriveAuditLister,DestinationPauser,DestinationEnabler,DestinationLister,DestinationFinder,Authorizer,LedgerQueue,BatchLedger,ClaimsByDestinationRoom,DueNotifier,HistoryCleaner,UnpublishedRecovery,DestinationGuard
