// Package bench measures dynamolock against Amazon DynamoDB Local: DynamoDB
// calls per operation (counted by SDK middleware), latency against the raw
// DynamoDB round trip, heartbeat capacity, failover and hand-over (across
// processes and within one), contention (per acquisition mode), and what
// that costs on DynamoDB at fleet scale, each beside its goal (goals.go).
// cmd/lockbench is its command line;
// `make bench` runs it and writes docs/BENCHMARKS.md and docs/benchmarks.png.
//
// Figures are printed and written, never asserted: the machine is shared and
// noisy, so every figure is a median or a ratio measured in one run, next to
// the raw DynamoDB call measured in the same run.
package bench
