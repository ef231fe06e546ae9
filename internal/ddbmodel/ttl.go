package ddbmodel

import (
	"context"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// UpdateTimeToLive enables or disables TTL on a table, at once, and
// refuses another change of it within the hour. The model keeps the
// setting; it never deletes an expired item (DynamoDB deletes
// them in the background, typically within days, so no test may rely on
// the time of a deletion anyway).
func (m *Model) UpdateTimeToLive(ctx context.Context, in *dynamodb.UpdateTimeToLiveInput, _ ...func(*dynamodb.Options)) (*dynamodb.UpdateTimeToLiveOutput, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	out, err := m.updateTimeToLive(in)
	m.done(ctx, "UpdateTimeToLive", in, err, nil)
	return out, err
}

// ttlChangeInterval is how long after a change of a table's TTL setting
// DynamoDB refuses another.
const ttlChangeInterval = time.Hour

func (m *Model) updateTimeToLive(in *dynamodb.UpdateTimeToLiveInput) (*dynamodb.UpdateTimeToLiveOutput, error) {
	spec := in.TimeToLiveSpecification
	if spec == nil || spec.AttributeName == nil || spec.Enabled == nil {
		return nil, validation("1 validation error detected: Value null at 'timeToLiveSpecification' failed to satisfy constraint: Member must not be null")
	}
	t, err := m.table(in.TableName)
	if err != nil {
		return nil, err
	}
	name := aws.ToString(spec.AttributeName)
	switch {
	case name == "":
		return nil, validation("TimeToLiveSpecification.AttributeName must not be empty")
	case *spec.Enabled && t.ttl == name:
		return nil, validation("TimeToLive is already enabled")
	case *spec.Enabled && t.ttl != "":
		return nil, validation("TimeToLive is active on a different AttributeName")
	case !*spec.Enabled && t.ttl == "":
		return nil, validation("TimeToLive is already disabled")
	case !*spec.Enabled && t.ttl != name:
		return nil, validation("TimeToLive is active on a different AttributeName")
	}
	// The Developer Guide's quotas ("API-specific limits"): one change of
	// a table's TTL per hour; DynamoDB Local allows any number
	// (TestRefusals lists the difference).
	now := m.now()
	if !t.ttlChanged.IsZero() && now.Sub(t.ttlChanged) < ttlChangeInterval {
		return nil, validation("Time to live has been modified multiple times within a fixed interval")
	}
	t.ttlChanged = now
	t.ttl = ""
	if *spec.Enabled {
		t.ttl = name
	}
	return &dynamodb.UpdateTimeToLiveOutput{TimeToLiveSpecification: &types.TimeToLiveSpecification{
		AttributeName: aws.String(name), Enabled: aws.Bool(*spec.Enabled),
	}}, nil
}

// DescribeTimeToLive describes a table's TTL setting: ENABLED on its
// attribute, or DISABLED.
func (m *Model) DescribeTimeToLive(ctx context.Context, in *dynamodb.DescribeTimeToLiveInput, _ ...func(*dynamodb.Options)) (*dynamodb.DescribeTimeToLiveOutput, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	t, err := m.table(in.TableName)
	if err != nil {
		m.done(ctx, "DescribeTimeToLive", in, err, nil)
		return nil, err
	}
	d := &types.TimeToLiveDescription{TimeToLiveStatus: types.TimeToLiveStatusDisabled}
	if t.ttl != "" {
		d = &types.TimeToLiveDescription{TimeToLiveStatus: types.TimeToLiveStatusEnabled, AttributeName: aws.String(t.ttl)}
	}
	m.done(ctx, "DescribeTimeToLive", in, nil, nil)
	return &dynamodb.DescribeTimeToLiveOutput{TimeToLiveDescription: d}, nil
}
