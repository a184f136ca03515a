package hookrelaytest

import "testing"

// RunEngine runs whole-engine scenarios.
func RunEngine(t *testing.T, newHarness NewHarness) {}
