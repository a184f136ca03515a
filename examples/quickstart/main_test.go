package main

import (
	"bytes"
	"context"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/hookrelay/hookrelay"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// The quickstart is the README's first command: it must finish, show one
// delivery ID across the accounting attempts, and dead-letter the CRM one.
func TestQuickstartTimeline(t *testing.T) {
	var out bytes.Buffer
	require.NoError(t, run(context.Background(), &out, filepath.Join(t.TempDir(), "qs.db")))
	text := out.String()

	acct := hookrelay.DeliveryID("pay_7319", "accounting")
	crm := hookrelay.DeliveryID("pay_7319", "crm")
	attempts := regexp.MustCompile(regexp.QuoteMeta(acct)+` accounting +attempt (\d) → ([^\n]+)`).FindAllStringSubmatch(text, -1)
	require.Len(t, attempts, 3, text)
	assert.Contains(t, attempts[0][2], "HTTP 503")
	assert.Contains(t, attempts[1][2], "HTTP 503")
	assert.Contains(t, attempts[2][2], "HTTP 204")
	assert.Equal(t, 2, strings.Count(text, acct+" accounting retry as attempt"), "two retries scheduled, same ID")
	assert.Contains(t, text, crm+" crm        dead-lettered: unprocessable_entity")
	assert.Contains(t, text, "applied the payment 1 time(s)")
	assert.Regexp(t, acct+` +accounting delivered +attempts=3`, text)
	assert.Regexp(t, crm+` +crm +dead +attempts=1 last_reason="unprocessable_entity"`, text)
}
