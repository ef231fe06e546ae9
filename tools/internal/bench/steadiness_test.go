package bench

import (
	"math"
	"testing"
)

func TestSteadinessWindows(t *testing.T) {
	r := &SteadinessResult{PerSecond: []int{100, 100, 40, 40, 100, 220}} // mean 100
	cases := []struct {
		w           int
		worst, best float64
	}{
		{1, 0.40, 2.20},
		{2, 0.40, 1.60},
		{3, 0.60, 1.20},
		{6, 1.00, 1.00},
	}
	for _, c := range cases {
		worst, best, ok := r.Window(c.w)
		if !ok || math.Abs(worst-c.worst) > 1e-9 || math.Abs(best-c.best) > 1e-9 {
			t.Errorf("Window(%d) = %.3f, %.3f, %v; want %.2f, %.2f, true", c.w, worst, best, ok, c.worst, c.best)
		}
	}
	if _, _, ok := r.Window(7); ok {
		t.Error("Window(7) of 6 seconds: ok")
	}
	first, last, ok := r.Thirds()
	if !ok || first != 1.0 || math.Abs(last-1.6) > 1e-9 {
		t.Errorf("Thirds() = %.3f, %.3f, %v; want 1.00, 1.60, true", first, last, ok)
	}
	empty := &SteadinessResult{}
	if _, _, ok := empty.Window(1); ok {
		t.Error("Window(1) of nothing: ok")
	}
	if _, _, ok := empty.Thirds(); ok {
		t.Error("Thirds() of nothing: ok")
	}
}
