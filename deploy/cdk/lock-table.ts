// The lock table of github.com/arielsrv/dynamolock/v2 as an AWS CDK
// construct (aws-cdk-lib v2): the table, in one Region or as a global
// table with multi-Region strong consistency, the grants its clients need
// by feature, and optionally a resource-based policy sharing it with
// principals of other accounts. docs/DEPLOY.md explains each choice;
// deploy_test.go keeps the names and actions in step with the library.
//
//   const locks = new LockTable(this, 'Locks', { sharedWith: [new iam.ArnPrincipal(otherAccountRole)] });
//   locks.grantLocks(workerRole);

import { RemovalPolicy, Stack } from 'aws-cdk-lib';
import * as dynamodb from 'aws-cdk-lib/aws-dynamodb';
import * as iam from 'aws-cdk-lib/aws-iam';
import { Construct } from 'constructs';

export interface LockTableProps {
  /** The table's name. Default: 'locks'. */
  readonly tableName?: string;
  /** The attribute DynamoDB's TTL reads: give clients WithTTLAttribute with the same name. Default: 'ttl'. */
  readonly ttlAttribute?: string;
  /**
   * Point-in-time recovery. Default: off. A restored lock table rolls
   * fencing tokens back and revives dead holders (docs/DEPLOY.md).
   */
  readonly pointInTimeRecovery?: boolean;
  /**
   * Two more Regions of one multi-Region strong consistency set (with the
   * stack's, three): the table becomes a global table with MRSC. It has no
   * transactions: AcquireLocks and a fair semaphore of more than one slot
   * return ErrUnsupportedOperation on it. Default: one Region.
   */
  readonly strongReplicaRegions?: string[];
  /** Principals of other accounts allowed to use the table by its ARN. Default: none. */
  readonly sharedWith?: iam.IPrincipal[];
}

export class LockTable extends Construct {
  readonly table: dynamodb.TableV2;

  constructor(scope: Construct, id: string, props: LockTableProps = {}) {
    super(scope, id);
    const strong = props.strongReplicaRegions ?? [];
    this.table = new dynamodb.TableV2(this, 'Table', {
      tableName: props.tableName ?? 'locks',
      partitionKey: { name: 'key', type: dynamodb.AttributeType.STRING },
      billing: dynamodb.Billing.onDemand(),
      timeToLiveAttribute: props.ttlAttribute ?? 'ttl',
      pointInTimeRecoverySpecification: { pointInTimeRecoveryEnabled: props.pointInTimeRecovery ?? false },
      deletionProtection: true,
      removalPolicy: RemovalPolicy.RETAIN,
      ...(strong.length > 0
        ? { multiRegionConsistency: dynamodb.MultiRegionConsistency.STRONG, replicas: strong.map((region) => ({ region })) }
        : {}),
      ...(props.sharedWith && props.sharedWith.length > 0
        ? {
            resourcePolicy: new iam.PolicyDocument({
              statements: [
                new iam.PolicyStatement({
                  sid: 'LockClientsOfAnotherAccount',
                  principals: props.sharedWith,
                  actions: ['dynamodb:ConditionCheckItem', 'dynamodb:DeleteItem', 'dynamodb:DescribeTable', 'dynamodb:GetItem', 'dynamodb:Query', 'dynamodb:Scan', 'dynamodb:UpdateItem'],
                  // A table's own policy names it with a wildcard: its ARN is not known before it exists.
                  resources: ['*'],
                }),
              ],
            }),
          }
        : {}),
    });
  }

  /** Acquire, heartbeat, release, Get, Do, Election, Semaphore, RWLock, the table check. */
  grantLocks(grantee: iam.IGrantable): void {
    this.grant(grantee, new iam.PolicyStatement({ sid: 'Locks', actions: ['dynamodb:DeleteItem', 'dynamodb:DescribeTable', 'dynamodb:GetItem', 'dynamodb:UpdateItem'], resources: [this.table.tableArn] }));
  }

  /** AcquireLocks, a fair Semaphore of more than one slot, and your own transactions guarded by TransactionCondition or TransactionWithRefresh. */
  grantTransactions(grantee: iam.IGrantable): void {
    this.grant(grantee, new iam.PolicyStatement({ sid: 'Transactions', actions: ['dynamodb:ConditionCheckItem', 'dynamodb:UpdateItem'], resources: [this.table.tableArn] }));
  }

  /** AllLocks and LocksByPartitionKey. */
  grantListings(grantee: iam.IGrantable): void {
    this.grant(grantee, new iam.PolicyStatement({ sid: 'Listings', actions: ['dynamodb:Query', 'dynamodb:Scan'], resources: [this.table.tableArn] }));
  }

  /** The check for a legacy (2017.11.29) global table, asked for a table with a stream of new and old images only. */
  grantLegacyGlobalTableCheck(grantee: iam.IGrantable): void {
    const arn = `arn:aws:dynamodb::${Stack.of(this).account}:global-table/${this.table.tableName}`;
    this.grant(grantee, new iam.PolicyStatement({ sid: 'LegacyGlobalTableCheck', actions: ['dynamodb:DescribeGlobalTable'], resources: [arn] }));
  }

  /** CreateTable and CreateTableIfNotExists (with WithTags and WithTimeToLive). */
  grantCreateTable(grantee: iam.IGrantable): void {
    this.grant(grantee, new iam.PolicyStatement({ sid: 'CreateTable', actions: ['dynamodb:CreateTable', 'dynamodb:DescribeTable', 'dynamodb:TagResource', 'dynamodb:UpdateTimeToLive'], resources: [this.table.tableArn] }));
  }

  private grant(grantee: iam.IGrantable, statement: iam.PolicyStatement): void {
    grantee.grantPrincipal.addToPrincipalPolicy(statement);
  }
}
