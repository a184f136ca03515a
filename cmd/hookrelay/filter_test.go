package main

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A filter flag given with nothing in it (--tenant "$UNSET_VAR", or only
// commas and spaces) is refused: taken as no filter, it would select every
// tenant's deliveries, and a redrive would move them all.
func TestEmptyFilterValuesAreRefusedNotWidened(t *testing.T) {
	db := database{dsn: filepath.Join(t.TempDir(), "hookrelay.db"), prefix: "hookrelay_"}
	require.Zero(t, db.cli(t, "migrate").code)
	db.open(t)
	db.seed(t, 2)
	for _, args := range [][]string{
		{"redrive", "plan", "--tenant", ""},
		{"redrive", "plan", "--tenant", " , "},
		{"redrive", "plan", "--destination", ""},
		{"dead", "list", "--event-type", ","},
		{"redrive", "start", "--tenant", "", "--rate", "1000", "--actor", "ops", "--reason", "r", "--cross-tenant"},
	} {
		r := db.cli(t, args...)
		assert.Equal(t, exitUsage, r.code, "%q: %s", args, r)
		assert.Contains(t, r.stderr, "empty", "%q", args)
	}
	r := db.cli(t, "--json", "redrive", "plan")
	require.Zero(t, r.code, r)
	assert.Contains(t, r.stdout, `"total": 3`, "nothing was redriven")
	r = db.cli(t, "--json", "redrive", "plan", "--tenant", "tenant_a, ,tenant_a")
	require.Zero(t, r.code, r)
	assert.Contains(t, r.stdout, `"total": 2`, "empty entries between real ones are dropped")
}
