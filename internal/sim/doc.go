// Package sim holds the deterministic simulation of the lock library: many
// clients on the in-memory DynamoDB model (internal/ddbmodel), through
// faults a seed chooses, in the virtual time of testing/synctest, with the
// invariants of a lock checked after every model request. It is all in the
// package's tests; see docs/SIMULATION.md and `make simulate`.
package sim
