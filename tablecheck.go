package dynamolock

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync/atomic"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"
)

// ErrEventualGlobalTable is matched by the error of every write to a global
// table replicated with multi-Region eventual consistency (see
// [GlobalTableError]), unless the client was made with
// [WithSingleWriterRegion].
var ErrEventualGlobalTable = errors.New("dynamolock: global table with multi-Region eventual consistency")

// GlobalTableError reports a lock table that DynamoDB replicates to other
// Regions with multi-Region eventual consistency (the default for global
// tables). Such a table evaluates each conditional write against the
// replica of the Region it is sent to and resolves conflicting writes
// later, last writer wins: two clients writing through two Regions can
// both acquire one key. Global tables of both versions are found: the
// current one (2019.11.21) from DescribeTable, the legacy one (2017.11.29,
// always eventually consistent) from DescribeGlobalTable, asked only for a
// table with a stream of new and old images, which its replicas must have.
// It matches [ErrEventualGlobalTable].
type GlobalTableError struct {
	Table   string
	Regions []string // the Regions of the table's replicas, as DynamoDB lists them

	version string // "2017.11.29" for a legacy global table; "" for the current version
}

func (e *GlobalTableError) Error() string {
	kind := "a global table"
	if e.version != "" {
		kind += " of version " + e.version
	}
	return fmt.Sprintf("dynamolock: table %q is %s with multi-Region eventual consistency (replicas in %s): "+
		"clients writing through two Regions could both hold one lock; use a table with multi-Region strong consistency, "+
		"or, if every client of the table writes through one Region, New(..., WithSingleWriterRegion())",
		e.Table, kind, strings.Join(e.Regions, ", "))
}

// Is reports whether target is ErrEventualGlobalTable.
func (e *GlobalTableError) Is(target error) bool { return target == ErrEventualGlobalTable }

// WithSingleWriterRegion declares that every client of the lock table,
// in every process, writes through one Region. A global table replicated
// with multi-Region eventual consistency is then accepted: its other
// replicas only receive copies. Without it, such a table is refused with an
// error matching [ErrEventualGlobalTable] before any write. Tables with
// multi-Region strong consistency, and tables without replicas, need no
// option.
func WithSingleWriterRegion() ClientOption {
	return func(c *Client) { c.cfg.singleWriterRegion = true }
}

// tableCheck is what a client learned of its table's replication, with one
// DescribeTable before its first write.
type tableCheck struct {
	sem     chan struct{} // one DescribeTable at a time; made by New
	checked atomic.Bool   // the outcome below is set
	refused error         // every write fails with it (an eventual global table), as never sent
	strong  bool          // multi-Region strong consistency
	warned  atomic.Uint32 // the checkWarning each already logged, one bit each
	fails   atomic.Uint64 // checks that failed (the network): see checkTable
	failed  error         // the last one's error; written holding sem
}

// checkTable makes sure the client knows its table's replication before it
// writes: the first write of a client describes the table once; a global
// table with multi-Region eventual consistency, of either version, is
// refused (unless WithSingleWriterRegion). Where the check cannot run (the
// DynamoDBClient lacks DescribeTable, or DescribeGlobalTable where it is
// needed; the policy denies one; the endpoint does not know one), the check
// is skipped with one warning per reason. A check that fails otherwise (the
// network) is the write's failure, as a write that was never sent, and is
// tried again by the next write.
func (c *Client) checkTable(ctx context.Context) error {
	t := &c.table
	if t.checked.Load() {
		return t.refused
	}
	fails := t.fails.Load()
	select {
	case t.sem <- struct{}{}:
	case <-ctx.Done():
		return &notSentError{err: ctx.Err()}
	}
	defer func() { <-t.sem }()
	if t.checked.Load() {
		return t.refused
	}
	if t.fails.Load() != fails {
		// A check failed while this write waited for it: that is this
		// write's failure too, rather than one more wait for an endpoint
		// that just did not answer. The next write tries again.
		return t.failed
	}
	fail := func(err error) error {
		if ctx.Err() != nil {
			// This write's own context ended the check: not a failure
			// of the endpoint, and not the other waiters' to share.
			return &notSentError{err: err}
		}
		t.failed = &notSentError{err: err}
		t.fails.Add(1)
		return t.failed
	}
	if !c.canDescribe() {
		if !c.cfg.singleWriterRegion { // with it, there is nothing to refuse
			c.warnCheck(ctx, warnNoDescribeTable, nil)
		}
		t.checked.Store(true)
		return nil
	}
	out, err := c.describeTable(ctx, "the table check", c.cfg.tableName)
	switch {
	case cannotRun(err):
		c.warnCheck(ctx, warnDescribeTable, err)
		t.checked.Store(true)
		return nil
	case isNotFound(err):
		return fail(c.tableNotFound(err))
	case err != nil:
		return fail(err)
	}
	refused, err := c.checkReplication(ctx, out.Table)
	if err != nil {
		return fail(err)
	}
	if refused != nil {
		// A write it refuses was never sent: the acquisition that made it
		// must not try to undo it (which the check would refuse again).
		t.refused = &notSentError{err: refused}
	}
	t.strong = out.Table != nil && out.Table.MultiRegionConsistency == types.MultiRegionConsistencyStrong
	t.checked.Store(true)
	return t.refused
}

// checkReplication returns the error that refuses a table described as d
// for locks (a global table with multi-Region eventual consistency, unless
// WithSingleWriterRegion), or nil; err is a failure of the check itself,
// which a later try may not meet (the network).
//
// Global tables of the current version (2019.11.21) list their replicas in
// d. Those of the legacy version (2017.11.29) do not: only
// DescribeGlobalTable names their Regions. Every replica of a legacy global
// table must have a DynamoDB stream of new and old images (CreateGlobalTable
// and UpdateGlobalTable refuse a table without one), so only a table that
// has one (and is not a global table of the current version) costs the
// DescribeGlobalTable: most lock tables have no stream.
func (c *Client) checkReplication(ctx context.Context, d *types.TableDescription) (refused, err error) {
	if c.cfg.singleWriterRegion || d == nil {
		return nil, nil
	}
	if refused := c.replicationRefused(d); refused != nil || !mayBeLegacyGlobal(d) {
		return refused, nil
	}
	if _, isARN := parseTableARN(c.cfg.tableName); isARN {
		// DescribeGlobalTable takes a name, in the caller's own account: it
		// cannot describe a table of another account, and a table shared
		// with another account cannot be a legacy replica (resource-based
		// policies do not support them).
		c.warnCheck(ctx, warnARNLegacyGlobal, nil)
		return nil, nil
	}
	if !c.canDescribeGlobal() {
		c.warnCheck(ctx, warnNoDescribeGlobalTable, nil)
		return nil, nil
	}
	out, err := c.describeGlobalTable(ctx, aws.ToString(d.TableName))
	switch {
	case isGlobalTableNotFound(err):
		return nil, nil
	case cannotRun(err):
		c.warnCheck(ctx, warnDescribeGlobalTable, err)
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("dynamolock: the global-table check of %q: %w", aws.ToString(d.TableName), err)
	case out.GlobalTableDescription == nil || len(out.GlobalTableDescription.ReplicationGroup) < 2:
		return nil, nil // one Region: nothing to conflict with
	}
	regions := make([]string, 0, len(out.GlobalTableDescription.ReplicationGroup))
	for _, r := range out.GlobalTableDescription.ReplicationGroup {
		regions = append(regions, aws.ToString(r.RegionName))
	}
	slices.Sort(regions)
	return &GlobalTableError{Table: aws.ToString(d.TableName), Regions: regions, version: legacyGlobalTableVersion}, nil
}

// legacyGlobalTableVersion is the version of global tables that only
// DescribeGlobalTable describes.
const legacyGlobalTableVersion = "2017.11.29"

// mayBeLegacyGlobal reports whether d may be a replica of a global table of
// the legacy version: it has a stream of new and old images, and it is not
// a global table of the current version.
func mayBeLegacyGlobal(d *types.TableDescription) bool {
	if v := aws.ToString(d.GlobalTableVersion); v != "" && v != legacyGlobalTableVersion {
		return false
	}
	s := d.StreamSpecification
	return s != nil && aws.ToBool(s.StreamEnabled) && s.StreamViewType == types.StreamViewTypeNewAndOldImages
}

// replicationRefused returns the error that refuses a table description d
// for locks from what d itself shows (replicas of a global table of the
// current version), or nil.
func (c *Client) replicationRefused(d *types.TableDescription) error {
	if d == nil || len(d.Replicas) == 0 || d.MultiRegionConsistency == types.MultiRegionConsistencyStrong || c.cfg.singleWriterRegion {
		return nil
	}
	regions := make([]string, 0, len(d.Replicas))
	for _, r := range d.Replicas {
		regions = append(regions, aws.ToString(r.RegionName))
	}
	slices.Sort(regions)
	return &GlobalTableError{Table: aws.ToString(d.TableName), Regions: regions}
}

// cannotRun reports whether err means that a describing call of the check
// cannot succeed for this client however often it is tried: the policy
// denies it (a least-privilege policy written for the calls v2 made), or
// the endpoint does not know it (an emulator: DynamoDB Local answers
// DescribeGlobalTable so).
func cannotRun(err error) bool {
	var ae smithy.APIError
	if !errors.As(err, &ae) {
		return false
	}
	switch ae.ErrorCode() {
	case "AccessDeniedException", "UnknownOperationException":
		return true
	}
	return false
}

// The reasons the check cannot run, each warned about once per client.
type checkWarning uint32

const (
	warnNoDescribeTable checkWarning = 1 << iota
	warnDescribeTable
	warnNoDescribeGlobalTable
	warnDescribeGlobalTable
	warnARNLegacyGlobal
)

// warnCheck logs, once per client, that the check cannot run for reason w
// (err: DynamoDB's answer, if any), and what would let it run.
func (c *Client) warnCheck(ctx context.Context, w checkWarning, err error) {
	if c.table.warned.Or(uint32(w))&uint32(w) != 0 {
		return
	}
	var msg string
	switch w {
	case warnNoDescribeTable:
		msg = "the DynamoDBClient given to New has no DescribeTable method: the lock table is not checked for global-table replication " +
			"(a wrapper written for dynamolock v2 has only the five methods DynamoDBClient names: give it DescribeTable, and DescribeGlobalTable, to have the table checked)"
	case warnDescribeTable:
		msg = "cannot DescribeTable the lock table: not checked for global-table replication (allow dynamodb:DescribeTable to check it)"
	case warnNoDescribeGlobalTable:
		msg = "the lock table has a stream of new and old images, as every replica of a global table of version 2017.11.29 (legacy) must, and the DynamoDBClient given to New has no DescribeGlobalTable method: " +
			"not checked for legacy global-table replication (give the client DescribeGlobalTable to have it checked)"
	case warnARNLegacyGlobal:
		msg = "the lock table, named by its ARN, has a stream of new and old images, as every replica of a global table of version 2017.11.29 (legacy) must: " +
			"not checked for legacy global-table replication, since DescribeGlobalTable takes a table name in the caller's own account " +
			"(a table shared with another account cannot be a legacy replica: resource-based policies do not support them); name it by its name, from its own account, to have it checked"
	case warnDescribeGlobalTable:
		msg = "the lock table has a stream of new and old images, as every replica of a global table of version 2017.11.29 (legacy) must, and DescribeGlobalTable failed: " +
			"not checked for legacy global-table replication (allow dynamodb:DescribeGlobalTable to check it)"
	}
	attrs := []slog.Attr{slog.String("table", c.cfg.tableName)}
	if err != nil {
		attrs = append(attrs, slogErr(err))
	}
	c.cfg.logger.LogAttrs(ctx, slog.LevelWarn, msg, attrs...)
}

// transactions returns the error for feature on a table that cannot run
// transactions: DynamoDB does not support them on global tables with
// multi-Region strong consistency.
func (t *tableCheck) transactions(table, feature string) error {
	if !t.strong {
		return nil
	}
	return fmt.Errorf("%w: %s needs TransactWriteItems, which DynamoDB does not support on table %q (a global table with multi-Region strong consistency)",
		ErrUnsupportedOperation, feature, table)
}
