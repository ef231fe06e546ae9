// Package faults injects failures into a DynamoDB SDK client for the
// library's tests: service errors with SDK middleware ([ServiceErrors],
// [Inject]) and client settings under which a failing network is noticed
// fast ([Timeouts], [Endpoint]). It also builds the errors the SDK returns
// for a failure ([RefusedConnection], [LostConnection], [ServiceError],
// [APIError], [Canceled]) for doubles that answer without HTTP: the wrapper
// [Client] and the public package dynamolocktest. It depends on the AWS SDK
// alone. Network
// faults (a TCP proxy that cuts or slows connections) live in the tools
// module's internal/netfaults, so that the library's module does not carry
// the proxy's dependencies.
package faults
