package main

import (
	"errors"
	"flag"
	"fmt"
	"math"
	"strconv"
	"time"
)

// durationFlag is a duration flag like flag.DurationVar's, whose value
// written as a bare number ("--lease 10": Go's durations need a unit) is
// answered with the duration likely meant ("did you mean --lease 10s?")
// instead of the flag package's "parse error".
type durationFlag struct {
	d    *time.Duration
	name string
	// least and most bound the guesses for a bare number; usual is the
	// flag's usual value: the guess nearest it wins.
	least, most, usual time.Duration
}

// durationVar defines a duration flag on fs, as fs.DurationVar does. usage
// names its placeholder in back quotes (`duration`), which the help shows
// after the flag.
func durationVar(fs *flag.FlagSet, p *time.Duration, name string, value time.Duration, usage string, least, most, usual time.Duration) {
	*p = value
	fs.Var(&durationFlag{d: p, name: name, least: least, most: most, usual: usual}, name, usage)
}

func (f *durationFlag) String() string {
	if f == nil || f.d == nil {
		return time.Duration(0).String()
	}
	return f.d.String()
}

func (f *durationFlag) Set(s string) error {
	d, err := time.ParseDuration(s)
	if err == nil {
		*f.d = d
		return nil
	}
	n, numErr := strconv.ParseFloat(s, 64)
	if numErr != nil || math.IsNaN(n) || math.IsInf(n, 0) {
		return errors.New("not a duration: give a number and a unit, such as 500ms, 30s or 10m")
	}
	if guess := f.guess(s, n); guess != "" {
		return fmt.Errorf("a duration needs a unit: did you mean --%s %s?", f.name, guess)
	}
	return errors.New("a duration needs a unit, such as 500ms, 30s or 10m")
}

// guess is s with the unit that puts it within [least, most] nearest
// usual, or "" when none does.
func (f *durationFlag) guess(s string, n float64) string {
	best, off := "", math.Inf(1)
	for _, u := range []struct {
		d    time.Duration
		name string
	}{{time.Millisecond, "ms"}, {time.Second, "s"}, {time.Minute, "m"}} {
		v := n * float64(u.d)
		if v < float64(f.least) || v > float64(f.most) {
			continue
		}
		if o := math.Abs(math.Log(v / float64(f.usual))); o < off {
			best, off = s+u.name, o
		}
	}
	return best
}
