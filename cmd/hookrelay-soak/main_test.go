package main

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestWithAppName(t *testing.T) {
	assert.Equal(t, "postgres://postgres@127.0.0.1:5432/test?application_name=w&sslmode=disable",
		withAppName("postgres://postgres@127.0.0.1:5432/test?sslmode=disable", "w"))
	assert.Equal(t, "host=127.0.0.1 user=postgres application_name=w", withAppName("host=127.0.0.1 user=postgres", "w"))
}
