// Command lock-example runs a command while holding a dynamolock lock, so
// that it never runs on two hosts at once, and inspects the lock table.
//
//	lock-example [flags] <lock-name> <command> [args...]
//	lock-example [flags] create-table
//	lock-example [flags] list [--json]
//	lock-example [flags] show [--json] <lock-name>
//	lock-example [flags] force-release --owner <owner> <lock-name>
//	lock-example [flags] leader <election-name> <command> [args...]
//
// Run `lock-example --help` for the flags, the exit status and examples;
// README.md beside this file says the same at more length.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/arielsrv/dynamolock/v2"
)

// Exit status of lock-example itself. Every other status is the command's
// own. 75 is sysexits' EX_TEMPFAIL ("try again later"); 125-127 mean what
// they mean for timeout(1) and env(1).
const (
	exitOK        = 0
	exitBusy      = 75  // lock held by someone else, or --timeout passed while waiting
	exitLockLost  = 76  // lock lost while the command ran; the command was stopped
	exitSetup     = 125 // usage or setup error: bad flags, no table, DynamoDB unreachable
	exitCannotRun = 126 // the command was found but could not be started
	exitNotFound  = 127 // the command was not found
	exitNoSuchKey = 1   // show / force-release: no lock item with that name
	// exitNotReleased: force-release found nothing of --owner's to release
	// (the lock is another owner's, shared holders', or was renewed
	// meanwhile). Not a usage error: the command line was right, the lock
	// was not in the state it named; 1, as for a lock that is not there.
	exitNotReleased = 1
)

const usageText = `Usage:
  lock-example [flags] <lock-name> <command> [args...]
  lock-example [flags] create-table
  lock-example [flags] list [--json] [--watch D]
  lock-example [flags] show [--json] [--watch D] <lock-name>
  lock-example [flags] force-release --owner <owner> <lock-name>
  lock-example [flags] leader <election-name> <command> [args...]

Runs <command> while holding the lock <lock-name> in a DynamoDB table, so
that it never runs in two places at once: a cron job that must run on one
host at a time, a deploy step that must never overlap.

Modes (README.md says each one's guarantees and DynamoDB costs):
  (default)          exclusive: no other run of the name at once, shared or not
  --shared           shared: any number of --shared runs at once, never beside
                     an exclusive one; an exclusive run that waits goes before
                     shared runs that come after it (it is never starved)
  --limit N          at most N runs of the name at once, each in one of N slots
                     (DYNAMOLOCK_SLOT, 0 to N-1); every run of the name must
                     give the same N (runs that give a larger N use more slots,
                     so up to the largest N run at once)
  --hold-at-least D  keep the lock, renewed, until D after it was taken, even
                     when the command ends sooner, so that a job scheduled on
                     several hosts runs once: a run that fires within D exits
                     75 (without --wait-for-lock). lock-example exits with the
                     command's status once D has passed; SIGINT or SIGTERM
                     releases it at once. At most 24h.

The command is run directly (no shell: write sh -c '...' for one), with
stdin, stdout and stderr passed through, in a process group of its own (the
job); in the foreground of a terminal, the job gets the terminal. SIGINT,
SIGTERM, SIGHUP, SIGQUIT, SIGUSR1 and SIGUSR2 sent to lock-example are
forwarded to the job. Its environment also holds DYNAMOLOCK_NAME,
DYNAMOLOCK_OWNER and DYNAMOLOCK_FENCING_TOKEN (see Fencing below), and
with --limit, DYNAMOLOCK_SLOT.

What lock-example guarantees, for every process of the job, in every mode:
  - While the job runs, lock-example renews the lock every --heartbeat.
  - Lock lost (taken over, force-released): the job gets SIGTERM, then
    SIGKILL after --kill-grace; exit 76.
  - Renewals failing (DynamoDB unreachable): once they have failed for
    --lease minus --kill-grace minus a margin of a tenth of the lease, the
    job gets SIGTERM, and SIGKILL one margin before the lease runs out: it
    is dead before another host can take the lock over; exit 76.
  - lock-example killed (SIGKILL, out of memory, crash): a guardian process
    kills the whole job at once.
  - The command exits: processes it left in the job get SIGTERM, then
    SIGKILL after --kill-grace; the lock is released once they are gone
    (if any outlives SIGKILL by 5s, after one more lease, renewed).
  - Ctrl-Z, under a shell with job control: the whole job (SIGSTOP) and
    lock-example stop together; fg or bg continues the job only once a
    renewal of the lock has succeeded, else the job is killed (exit 76).
    Without job control, a stopped job is left stopped, its lock renewed.
Not guaranteed: a process that leaves the job's process group (setsid,
setpgid, a daemon that detaches) is not followed and can outlive the lock,
as can anything the job starts elsewhere (at, systemd-run, ssh, a container
engine). lock-example stopped alone by SIGSTOP (not Ctrl-Z), or a host
frozen for longer than the margin, can let the job run on past the lease.

Fencing: DYNAMOLOCK_FENCING_TOKEN grows with every acquisition of the lock.
A lease cannot stop a writer that was paused or cut off after the lock
passed on; a store that remembers the highest token it has seen and
rejects writes carrying a lower one can. Pass it with every write that
must never come from two holders.

When the command ends, lock-example exits with its status. On success the
lock is released; the item stays, with the --data of this run readable
through show and list. When it fails (non-zero status, or killed by a
signal), the lock is kept for one more lease, renewed, so that a failed job
is not at once run again elsewhere, then released, and lock-example exits;
SIGINT, SIGTERM, SIGHUP or SIGQUIT end that wait early. --release-on-error
releases it at once. A command that ends after lock-example got one of
those four signals, that one of them killed, or that exits with 128+N
after signal N of them reached its group (Ctrl-C at a terminal) was asked
to stop, not failed: once no process of its group is left, the lock is
released at once, --hold-at-least or not.

A held lock makes lock-example exit at once with 75, unless
--wait-for-lock: then it waits until the lock is released, or taken over
because its holder stopped renewing it (seen unchanged for the holder's
whole lease), for at most --timeout. If DynamoDB fails for a whole --lease
while waiting, lock-example exits with 125.

Exit status:
  0-255  the command's own status (128+N when a signal N killed it)
  75     the lock is busy (no --wait-for-lock), or --timeout passed while waiting
  76     the lock was lost, or could not be renewed in time, while the
         command ran; the command was stopped
  125    usage or setup error: bad flags, table missing, DynamoDB unreachable
         (also when found out while waiting: never reported as 75)
  126    the command could not be started
  127    the command was not found
  130    interrupted (SIGINT) while waiting for the lock; 143 for SIGTERM (128+N)
  For show: 0 done, 1 no such lock, 125 error. For force-release: 0
  released (or already released), 1 nothing released (no such lock, or not
  held by --owner: another owner's, shared holders', or renewed meanwhile),
  125 error.

Leader mode (lock-example [flags] leader NAME COMMAND): a service that must
run on one host at a time, handed over when that host fails. lock-example
campaigns for the election NAME for as long as it takes; while it leads, it
runs COMMAND as the exclusive mode does (renewed, stopped in time when
leadership is lost or cannot be renewed); when leadership is lost, the
command is stopped and lock-example campaigns again, and runs COMMAND again
(DYNAMOLOCK_FENCING_TOKEN: the new term's) when it leads again. When COMMAND
ends while leading, lock-example resigns (as a run releases its lock) and
exits with its status. SIGINT or SIGTERM ends the wait, or are forwarded to
the command. --data is the leader's value. --shared, --limit,
--hold-at-least and --timeout do not apply. Use election names for leader
mode only: a plain run of the same name would not see the election.

Subcommands (a lock named like one is run with: lock-example [flags] -- <lock-name> <command>):
  create-table   create the table (and its sort key with --sort-key NAME);
                 an existing table is not an error
  list           list every lock: key, sort key (the table's, found with
                 DescribeTable), how it is held (exclusive, shared by N, slot
                 i of N), owner, lease, released, fencing token, data size;
                 --json prints a JSON array
  show           print one lock, with its data and its shared holders and
                 waiters; for a --limit name (or with --limit N), its slots;
                 --json prints a JSON object
  force-release  release a lock whose holder died; --owner must name its
                 current owner, as list and show print it. A live holder loses
                 the lock at its next heartbeat.
  With --watch D, list and show read the locks again for D and say of each
  whether its record version number changed (the holder renewed it, and
  when at the latest) or for how long it did not: a holder that renewed
  nothing for its whole lease is dead or cut off. No clock is compared.

DynamoDB endpoint and credentials:
  DYNAMODB_ENDPOINT, else AWS_ENDPOINT_URL_DYNAMODB, else AWS_ENDPOINT_URL
  (unless AWS_IGNORE_CONFIGURED_ENDPOINT_URLS=true), else DynamoDB in
  the region. Region and credentials come from the AWS SDK's default chain:
  AWS_REGION, AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, AWS_PROFILE and the
  shared config files, SSO, container and instance roles. Only for an
  endpoint on this machine (localhost, 127.0.0.0/8, ::1: DynamoDB Local)
  does lock-example fill in what the chain lacks: region us-east-1 and
  dummy credentials.

Examples:
  # Run the nightly backup on one host only; another host skips it (exit 75).
  lock-example nightly-backup /usr/local/bin/backup --full

  # Deploy; if a deploy is running, wait up to 10 minutes for it to end.
  lock-example --wait-for-lock --timeout 10m deploy-prod ./deploy.sh v1.2.3

  # Backups read the database together; a migration waits for them, alone.
  lock-example --shared --wait-for-lock db ./backup.sh
  lock-example --wait-for-lock db ./migrate.sh

  # At most 4 encoders across the fleet.
  lock-example --limit 4 --wait-for-lock encoders ./encode.sh "$FILE"

  # The scheduler daemon runs on one host of the fleet; another takes over when it dies.
  lock-example --lease 10s leader scheduler /usr/local/bin/scheduler --serve

  # Cron on every host at 02:00: the report runs once, whichever host fires first.
  0 2 * * * lock-example --hold-at-least 10m nightly-report ./report.sh

  # Against DynamoDB Local: create the table, run, look at the lock.
  export DYNAMODB_ENDPOINT=http://127.0.0.1:8000
  lock-example --create-table --data "$(hostname)" demo sh -c 'echo start; sleep 2; echo end'
  lock-example list

Flags:
`

// roleEnv, in lock-example's environment, selects one of the hidden roles
// lock-example re-executes itself in (see guardian_unix.go).
const roleEnv = "LOCK_EXAMPLE_INTERNAL_ROLE"

// defaultTable is the table of --table.
const defaultTable = "locks"

var subcommands = []string{"create-table", "list", "show", "force-release"}

// config holds the flags.
type config struct {
	table          string
	partitionKey   string
	sortKey        string // NAME=VALUE, or NAME for create-table and list
	owner          string
	data           string
	waitForLock    bool
	timeout        time.Duration
	lease          time.Duration
	heartbeat      time.Duration
	killGrace      time.Duration
	releaseOnError bool
	createTable    bool
	json           bool
	watch          time.Duration
	verbose        bool
	shared         bool            // --shared: a reader of the read/write lock name
	limit          int             // --limit N: one of N slots (0: not given)
	holdAtLeast    time.Duration   // --hold-at-least D
	set            map[string]bool // the flags given on the command line, by name
	leader         bool            // leader mode (leader.go)
}

func newFlagSet(cfg *config, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("lock-example", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&cfg.table, "table", defaultTable, "DynamoDB table holding the locks: its name, or its ARN (a table of another account)")
	fs.StringVar(&cfg.partitionKey, "partition-key-name", dynamolock.DefaultPartitionKeyName, "partition key attribute of the table")
	fs.StringVar(&cfg.sortKey, "sort-key", "", "NAME=VALUE: lock under sort key VALUE in attribute NAME (tables with a sort key);\nNAME alone for create-table and list")
	fs.StringVar(&cfg.owner, "owner", "", "owner name written in the lock (default: host name and a random UUID);\nfor force-release, the owner the lock must have")
	fs.StringVar(&cfg.data, "data", "", "data stored in the lock item, readable with show and list, also after release")
	fs.BoolVar(&cfg.waitForLock, "wait-for-lock", false, "wait while the lock is held instead of exiting with 75")
	durationVar(fs, &cfg.timeout, "timeout", 0, "longest wait for the lock, a `duration`; implies --wait-for-lock (0: no limit)",
		time.Second, 7*24*time.Hour, 10*time.Minute)
	durationVar(fs, &cfg.lease, "lease", dynamolock.DefaultLeaseDuration, "lease `duration`: how long the lock outlives its last heartbeat; at least 1s",
		10*minMargin, 24*time.Hour, dynamolock.DefaultLeaseDuration)
	durationVar(fs, &cfg.heartbeat, "heartbeat", 0, "heartbeat period, a `duration` of at least 100ms and at most half the lease (0: a quarter of --lease)",
		minMargin, time.Hour, dynamolock.DefaultHeartbeatPeriod)
	durationVar(fs, &cfg.killGrace, "kill-grace", 0, "time between SIGTERM and SIGKILL when the command must stop, a `duration` (0: a quarter of --lease);\nless than --lease minus --heartbeat minus a fifth of --lease",
		minMargin, time.Hour, 5*time.Second)
	fs.BoolVar(&cfg.releaseOnError, "release-on-error", false, "release the lock at once also when the command fails (default: keep it, renewed, for one more lease)")
	fs.BoolVar(&cfg.createTable, "create-table", false, "create the table first if it does not exist")
	fs.BoolVar(&cfg.json, "json", false, "list, show: print JSON")
	durationVar(fs, &cfg.watch, "watch", 0, "list, show: read the locks again until this `duration` has passed, and say which\nwere renewed meanwhile (a holder that renews none for its lease is dead or cut off)",
		time.Second, 24*time.Hour, 30*time.Second)
	fs.BoolVar(&cfg.verbose, "verbose", false, "log lock events to stderr")
	fs.BoolVar(&cfg.shared, "shared", false, "run as one of the lock's shared holders: shared runs overlap each other,\nand a run without --shared on the same name excludes them all")
	fs.IntVar(&cfg.limit, "limit", 0, fmt.Sprintf("run as one of at most N holders of the name at once (1 to %d; every run of\nthe name must give the same N); show: read the N slots of the name", dynamolock.MaxSemaphoreSize))
	durationVar(fs, &cfg.holdAtLeast, "hold-at-least", 0, "keep the lock, renewed, until this `duration` after it was taken, even when the command ends sooner\n(a scheduled job fired on several hosts runs once); at most 24h",
		time.Second, 24*time.Hour, 10*time.Minute)
	// flag calls Usage on every parse error; run prints the help itself.
	fs.Usage = func() {}
	return fs
}

// printHelp writes the usage text and the flags to w.
func printHelp(fs *flag.FlagSet, w io.Writer) {
	fmt.Fprint(w, usageText)
	fs.SetOutput(w)
	fs.PrintDefaults()
}

func main() {
	if role := os.Getenv(roleEnv); role != "" {
		os.Exit(runRole(role))
	}
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

// run parses args and runs the chosen mode; it returns the exit status.
func run(args []string, stdin, stdout, stderr *os.File) int {
	cfg := &config{}
	fs := newFlagSet(cfg, stderr)
	if err := fs.Parse(args); err != nil {
		return parseFailed(fs, err, stdout, stderr)
	}
	rest := fs.Args()
	// flag drops a "--" that ends the flags; it makes the next word a lock
	// name even when it is spelled like a subcommand.
	dashdash := len(rest) < len(args) && args[len(args)-len(rest)-1] == "--"
	if len(rest) == 1 && rest[0] == "help" && !dashdash {
		printHelp(fs, stdout)
		return exitOK
	}
	if len(rest) > 0 && slices.Contains(subcommands, rest[0]) && !dashdash {
		pos, err := parseInterspersed(fs, rest[1:])
		if err != nil {
			return parseFailed(fs, err, stdout, stderr)
		}
		cfg.noteSet(fs)
		return runAdmin(cfg, rest[0], pos, stdout, stderr)
	}
	if len(rest) > 0 && rest[0] == "leader" && !dashdash {
		// Flags may also come between "leader" and the election's name.
		if err := fs.Parse(rest[1:]); err != nil {
			return parseFailed(fs, err, stdout, stderr)
		}
		cfg.noteSet(fs)
		if rest = fs.Args(); len(rest) < 2 {
			fmt.Fprintln(stderr, "lock-example: leader needs an election name and a command; see lock-example --help")
			return exitSetup
		}
		return runLeader(cfg, rest[0], rest[1:], stdin, stdout, stderr)
	}
	cfg.noteSet(fs)
	if len(rest) < 2 {
		fmt.Fprintln(stderr, "lock-example: need a lock name and a command; see lock-example --help")
		return exitSetup
	}
	return runLocked(cfg, rest[0], rest[1:], stdin, stdout, stderr)
}

// noteSet records which flags the command line gave.
func (c *config) noteSet(fs *flag.FlagSet) {
	c.set = map[string]bool{}
	fs.Visit(func(f *flag.Flag) { c.set[f.Name] = true })
}

// parseFailed handles a flag error: --help prints the help, anything else
// (which flag has reported) is a usage error.
func parseFailed(fs *flag.FlagSet, err error, stdout, stderr io.Writer) int {
	if errors.Is(err, flag.ErrHelp) {
		printHelp(fs, stdout)
		return exitOK
	}
	fmt.Fprintln(stderr, "lock-example: see lock-example --help")
	return exitSetup
}

// parseInterspersed parses flags that may come before, between or after
// the positional arguments of a subcommand.
func parseInterspersed(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		args = fs.Args()
		if len(args) == 0 {
			return pos, nil
		}
		pos = append(pos, args[0])
		args = args[1:]
	}
}

// usageError is a bad flag value or combination, found before any
// DynamoDB call; lock-example exits with 125 on it.
type usageError struct {
	flag   string // the flag, as written on the command line
	value  any
	reason string
}

func (e *usageError) Error() string {
	if e.value == nil {
		return e.flag + ": " + e.reason
	}
	return fmt.Sprintf("%s %v: %s", e.flag, e.value, e.reason)
}

// minMargin is the least time lock-example relies on for a renewal's round
// trip, and for the command's process group to die before the lease ends:
// the margin (a tenth of the lease) and the heartbeat period must be at
// least this long, so the lease at least ten times it. With less, the
// lease is one lock-example cannot keep (it would stop the command with
// 76 once renewals could not come in time).
const minMargin = 100 * time.Millisecond

// timings are the lease arithmetic of a run, derived from the flags.
type timings struct {
	lease     time.Duration // --lease
	heartbeat time.Duration // --heartbeat, or a quarter of the lease
	killGrace time.Duration // --kill-grace, or a quarter of the lease
	// margin is how long before the end of the lease (by lock-example's own
	// clock, which starts counting before the renewing write is sent) the
	// command must be dead: time for SIGKILL to take effect, for a
	// scheduler delay, and for clocks that run at slightly different rates.
	margin time.Duration
}

// stopAfter is how long renewals may fail before lock-example starts
// stopping the command: SIGKILL then lands margin before the lease ends.
func (t timings) stopAfter() time.Duration { return t.lease - t.killGrace - t.margin }

// timings validates the duration flags and fills in their defaults.
func (c *config) timings() (timings, error) {
	t := timings{lease: c.lease, heartbeat: c.heartbeat, killGrace: c.killGrace}
	if t.lease <= 0 {
		return t, &usageError{"--lease", t.lease, "must be positive"}
	}
	if t.lease/10 < minMargin {
		return t, &usageError{"--lease", t.lease, fmt.Sprintf(
			"too short for lock-example to keep: the command must be dead a tenth of the lease (%s) before the lease ends, "+
				"and killing its process group, a scheduler delay and a renewal's round trip need at least %s; use --lease %s or longer",
			t.lease/10, minMargin, 10*minMargin)}
	}
	if t.heartbeat == 0 {
		t.heartbeat = t.lease / 4
	}
	switch {
	case t.heartbeat <= 0:
		return t, &usageError{"--heartbeat", t.heartbeat, "must be positive"}
	case t.heartbeat < minMargin:
		return t, &usageError{"--heartbeat", t.heartbeat, fmt.Sprintf(
			"too short: each renewal must be answered within one heartbeat period; use --heartbeat %s or longer", minMargin)}
	case t.heartbeat > t.lease/2:
		return t, &usageError{"--heartbeat", t.heartbeat, fmt.Sprintf("must be at most half of --lease %s", t.lease)}
	case c.timeout < 0:
		return t, &usageError{"--timeout", c.timeout, "must not be negative"}
	case t.killGrace < 0:
		return t, &usageError{"--kill-grace", t.killGrace, "must not be negative"}
	}
	if t.killGrace == 0 {
		t.killGrace = t.lease / 4
	}
	t.margin = t.lease / 10
	// A renewal is due every heartbeat: stopping must not begin before one
	// has had the time to fail (plus the margin for its round trip).
	if t.stopAfter() <= t.heartbeat+t.margin {
		return t, &usageError{"--kill-grace", t.killGrace, fmt.Sprintf(
			"does not fit in --lease %s: the command must be dead %s (a tenth of the lease) before the lease ends, "+
				"and stopping it may begin only after renewals failed for over --heartbeat %s plus that margin; "+
				"it must be less than %s (or use a longer --lease or a shorter --heartbeat)",
			t.lease, t.margin, t.heartbeat, max(0, t.lease-t.heartbeat-2*t.margin))}
	}
	return t, nil
}

// clientOptions turns the flags into the lock client's options.
func (c *config) clientOptions(stderr io.Writer) ([]dynamolock.ClientOption, error) {
	t, err := c.timings()
	if err != nil {
		return nil, err
	}
	opts := []dynamolock.ClientOption{
		dynamolock.WithPartitionKeyName(c.partitionKey),
		dynamolock.WithLeaseDuration(t.lease),
		dynamolock.WithHeartbeatPeriod(t.heartbeat),
	}
	if c.owner != "" {
		opts = append(opts, dynamolock.WithOwnerName(c.owner))
	}
	if c.sortKey != "" {
		name, value, ok := strings.Cut(c.sortKey, "=")
		if !ok || name == "" || value == "" {
			return nil, &usageError{"--sort-key", fmt.Sprintf("%q", c.sortKey), "want NAME=VALUE"}
		}
		opts = append(opts, dynamolock.WithSortKey(name, value))
	}
	if c.verbose {
		opts = append(opts, dynamolock.WithSlog(newLogger(stderr)))
	}
	return opts, nil
}

// newClient connects to DynamoDB and builds a lock client from the flags.
func (c *config) newClient(stderr io.Writer, extra ...dynamolock.ClientOption) (*dynamolock.Client, *itemTap, error) {
	if _, err := c.clientOptions(stderr); err != nil {
		return nil, nil, err // bad flags are reported before the AWS configuration is read
	}
	db, err := newDynamoDB(context.Background(), os.Getenv)
	if err != nil {
		return nil, nil, err
	}
	tap := c.tapOn(db)
	client, err := c.newClientFor(tap, stderr, extra...)
	if err != nil {
		return nil, nil, err
	}
	return client, tap, nil
}

// tapOn wraps db to remember the items its calls show (see itemTap).
func (c *config) tapOn(db *dynamodb.Client) *itemTap {
	sk, _, _ := strings.Cut(c.sortKey, "=")
	return newItemTap(db, c.partitionKey, sk)
}

// newClientFor builds a lock client on tap from the flags.
func (c *config) newClientFor(tap *itemTap, stderr io.Writer, extra ...dynamolock.ClientOption) (*dynamolock.Client, error) {
	opts, err := c.clientOptions(stderr)
	if err != nil {
		return nil, err
	}
	return dynamolock.New(tap, c.table, append(opts, extra...)...)
}
