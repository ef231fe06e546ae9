package bench

import (
	"fmt"
	"math"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Dist is a sorted sample of durations.
type Dist []time.Duration

// NewDist sorts a copy of ds.
func NewDist(ds []time.Duration) Dist {
	d := slices.Clone(ds)
	slices.Sort(d)
	return d
}

// Q returns the q-quantile (0 ≤ q ≤ 1) by the nearest-rank method, or 0
// for an empty sample.
func (d Dist) Q(q float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	i := int(math.Ceil(q*float64(len(d)))) - 1
	return d[min(max(i, 0), len(d)-1)]
}

// Max returns the largest value, or 0.
func (d Dist) Max() time.Duration {
	if len(d) == 0 {
		return 0
	}
	return d[len(d)-1]
}

// Mean returns the average, or 0.
func (d Dist) Mean() time.Duration {
	if len(d) == 0 {
		return 0
	}
	var s time.Duration
	for _, v := range d {
		s += v
	}
	return s / time.Duration(len(d))
}

// ms formats d in milliseconds with a precision suited to its size.
func ms(d time.Duration) string {
	v := float64(d) / float64(time.Millisecond)
	switch {
	case v < 10:
		return strconv.FormatFloat(v, 'f', 2, 64)
	case v < 100:
		return strconv.FormatFloat(v, 'f', 1, 64)
	}
	return strconv.FormatFloat(v, 'f', 0, 64)
}

func ratio(a, b time.Duration) string {
	if b == 0 {
		return "n/a"
	}
	return fmt.Sprintf("%.2f×", float64(a)/float64(b))
}

// cpuTime returns this process's user+system CPU time.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// procCPU returns the user+system CPU time of process pid from /proc, or
// 0 when it cannot be read.
func procCPU(pid int) time.Duration {
	if pid <= 0 {
		return 0
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(s[i+1:])
	// Fields after the command: state(0) ... utime(11) stime(12), in clock
	// ticks of 1/100 s on Linux.
	if len(f) < 13 {
		return 0
	}
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(ut+st) * 10 * time.Millisecond
}

// heapInUse returns the live heap after a full collection.
func heapInUse() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// loadAvg returns the 1-minute load average (0 when unknown).
func loadAvg() float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 0
	}
	v, _ := strconv.ParseFloat(f[0], 64)
	return v
}

// machineCPU is the machine's CPU time from the first line of /proc/stat,
// in clock ticks summed over the cores: busy (user, nice, system, irq,
// softirq), steal (time the hypervisor gave another guest while this one
// had work) and the total (idle and iowait too). All zero when unknown.
type machineCPU struct{ busy, steal, total int64 }

func readMachineCPU() machineCPU {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return machineCPU{}
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	if len(f) < 9 || f[0] != "cpu" {
		return machineCPU{}
	}
	var v [8]int64
	for i := range v {
		v[i], _ = strconv.ParseInt(f[i+1], 10, 64)
	}
	// user nice system idle iowait irq softirq steal
	m := machineCPU{busy: v[0] + v[1] + v[2] + v[5] + v[6], steal: v[7]}
	m.total = m.busy + m.steal + v[3] + v[4]
	return m
}

// stealPercent is the stolen share of the machine's CPU time between prev
// and m, in percent; -1 when /proc/stat is not there.
func (m machineCPU) stealPercent(prev machineCPU) int {
	t := m.total - prev.total
	if t <= 0 || prev.total == 0 {
		return -1
	}
	return int(100 * (m.steal - prev.steal) / t)
}

// since formats the machine's busy and stolen shares of its CPU time
// between prev and m, or "" when /proc/stat is not there.
func (m machineCPU) since(prev machineCPU) string {
	t := m.total - prev.total
	if t <= 0 || prev.total == 0 {
		return ""
	}
	return fmt.Sprintf(" cpu=%d%% steal=%d%%", 100*(m.busy-prev.busy)/t, 100*(m.steal-prev.steal)/t)
}
