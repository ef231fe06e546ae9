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
// both acquire one key. It matches [ErrEventualGlobalTable].
type GlobalTableError struct {
	Table   string
	Regions []string // the Regions of the table's replicas, as DynamoDB lists them
}

func (e *GlobalTableError) Error() string {
	return fmt.Sprintf("dynamolock: table %q is a global table with multi-Region eventual consistency (replicas in %s): "+
		"clients writing through two Regions could both hold one lock; use a table with multi-Region strong consistency, "+
		"or, if every client of the table writes through one Region, New(..., WithSingleWriterRegion())",
		e.Table, strings.Join(e.Regions, ", "))
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
	refused error         // every write fails with it (an eventual global table)
	strong  bool          // multi-Region strong consistency
}

// checkTable makes sure the client knows its table's replication before it
// writes: the first write of a client describes the table once; a global
// table with multi-Region eventual consistency is refused (unless
// WithSingleWriterRegion). Where DescribeTable is denied (a policy written
// for the calls v2 made) or the DynamoDBClient lacks it, the check is
// skipped, with a warning in the first case. A check that fails otherwise
// (the network) is the write's failure, as a write that was never sent, and
// is tried again by the next write.
func (c *Client) checkTable(ctx context.Context) error {
	t := &c.table
	if t.checked.Load() {
		return t.refused
	}
	select {
	case t.sem <- struct{}{}:
	case <-ctx.Done():
		return &notSentError{err: ctx.Err()}
	}
	defer func() { <-t.sem }()
	if t.checked.Load() {
		return t.refused
	}
	if !c.canDescribe() {
		t.checked.Store(true)
		return nil
	}
	out, err := c.describeTable(ctx, "the table check", c.cfg.tableName)
	var ae smithy.APIError
	switch {
	case err != nil && errors.As(err, &ae) && ae.ErrorCode() == "AccessDeniedException":
		c.cfg.logger.LogAttrs(ctx, slog.LevelWarn,
			"cannot DescribeTable the lock table: not checked for global-table replication (allow dynamodb:DescribeTable to check it)",
			slog.String("table", c.cfg.tableName), slogErr(err))
		t.checked.Store(true)
		return nil
	case isNotFound(err):
		return &notSentError{err: c.tableNotFound(err)}
	case err != nil:
		return &notSentError{err: err}
	}
	t.refused = c.replicationRefused(out.Table)
	t.strong = out.Table != nil && out.Table.MultiRegionConsistency == types.MultiRegionConsistencyStrong
	t.checked.Store(true)
	return t.refused
}

// replicationRefused returns the error that refuses a table description d
// for locks, or nil.
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
