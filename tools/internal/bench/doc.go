// Package bench measures dynamolock against Amazon DynamoDB Local: DynamoDB
// calls per operation (counted by SDK middleware), latency against the raw
// DynamoDB round trip, heartbeat capacity, failover and hand-over (across
// processes and within one), contention (per acquisition mode), what that
// costs on DynamoDB at fleet scale, and one client holding many locks under
// a session (WithSession) beside the same client without one, each beside
// its goal (goals.go, and the session's beside its run).
// cmd/lockbench is its command line;
// `make bench` runs it and writes docs/BENCHMARKS.md and docs/benchmarks.png.
//
// Figures are printed and written, never asserted: the machine is shared and
// noisy, so every figure is a median or a ratio measured in one run, next to
// the raw DynamoDB call measured in the same run.
package bench
