module github.com/hookrelay/hookrelay

go 1.26.0

require (
	github.com/benbjohnson/clock v1.3.5
	github.com/google/uuid v1.6.0
	github.com/standard-webhooks/standard-webhooks/libraries v0.0.1
	github.com/stretchr/testify v1.12.1
	go.uber.org/goleak v1.3.0
	golang.org/x/net v0.62.0
)

require go.yaml.in/yaml/v3 v3.0.5 // indirect
