package hookrelaytest

import "testing"

// RunLedger runs the Ledger contract tests.
func RunLedger(t *testing.T, newHarness NewHarness) {}
