module github.com/hookrelay/hookrelay

go 1.26.0

require (
	github.com/benbjohnson/clock v1.3.5
	github.com/google/uuid v1.6.0
)

require go.uber.org/goleak v1.3.0
