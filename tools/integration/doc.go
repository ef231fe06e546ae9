// Package integration holds black-box tests of the library that need
// dependencies its users must not inherit: network faults through a TCP
// proxy (toxiproxy) and metrics read back with the OpenTelemetry SDK. They
// run against DynamoDB Local like the root package's tests (started by
// TestMain unless DYNAMODB_ENDPOINT is set). The package has no code.
package integration
