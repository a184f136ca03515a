package hookrelaytest

import "testing"

// RunQueue runs the Queue contract tests.
func RunQueue(t *testing.T, newHarness NewHarness) {}
