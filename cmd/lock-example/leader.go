package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/arielsrv/dynamolock/v2"
)

// Leader mode: lock-example [flags] leader NAME COMMAND runs COMMAND while
// this process leads the election NAME (dynamolock's Election, the lock
// on NAME), and runs it again each time leadership comes back:
//
//   - it campaigns (Election.Campaign) for as long as it takes;
//   - leading, it runs the command under the term's lock exactly as the
//     exclusive mode runs one under its lock: the keeper renews it every
//     --heartbeat, and the command's process group is stopped (SIGTERM,
//     SIGKILL after --kill-grace) when the lock is lost or cannot be
//     renewed in time, dead a margin before the lease ends;
//   - leadership lost (the command stopped): it releases what it may
//     still hold and campaigns again, and runs the command again when it
//     leads again (DYNAMOLOCK_FENCING_TOKEN is the new term's);
//   - the command ends while leading (or a signal stops it): it resigns as
//     the exclusive mode releases, and exits with the command's status.
//
// It is the loop of dynamolock's Election.Run, written over Campaign
// rather than Run: lock-example renews its locks itself (keeper.go), so
// that it stops the command by its own clock, --kill-grace and a margin
// before the lease ends, where Run's term ends at a margin derived from
// the client's lease and heartbeat period alone.

// checkLeader refuses the flags that mean nothing to leader mode.
func (c *config) checkLeader() error {
	for _, name := range []string{"shared", "limit", "hold-at-least", "timeout"} {
		if c.set[name] {
			why := "is not for leader mode: a leader's command runs exclusively, for as long as it leads"
			if name == "timeout" {
				why = "is not for leader mode: a candidate campaigns until it leads, for ever (stop it with a signal)"
			}
			return &usageError{"--" + name, nil, why}
		}
	}
	return nil
}

// runLeader runs argv each time this process leads the election name, as
// leader mode says, and returns lock-example's exit status.
func runLeader(cfg *config, name string, argv []string, stdin, stdout, stderr *os.File) int {
	if err := cfg.checkLeader(); err != nil {
		fmt.Fprintf(stderr, "lock-example: %v\n", err)
		return exitSetup
	}
	cfg.leader, cfg.waitForLock = true, true
	return runLocked(cfg, name, argv, stdin, stdout, stderr)
}

// campaign is takeLock in leader mode: a campaign for the election name,
// with the run's --data as the leader's value.
func (r *runner) campaign(ctx context.Context, opts []dynamolock.AcquireLockOption) (*dynamolock.Lock, error) {
	var value []byte
	if r.cfg.data != "" {
		value = []byte(r.cfg.data)
	}
	return r.client.NewElection(r.name).Campaign(ctx, value, opts...)
}

// nextTerm settles a term whose leadership was lost: the command has been
// stopped; what the term's lock may still hold is released (best effort),
// and the next campaign may begin.
func (r *runner) nextTerm(lock *dynamolock.Lock) {
	ctx, cancel := context.WithTimeout(context.Background(), releaseTimeout)
	defer cancel()
	_, _ = r.client.ReleaseLockWithContext(ctx, lock, dynamolock.WithBestEffort())
	r.logf("leadership of %q lost (fencing token %d); the command was stopped; campaigning again", r.name, lock.FencingToken())
	r.terms++
	r.acquiredAt = time.Time{}
}
