package bench

import (
	"fmt"
	"image/color"
	"os"
	"slices"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// DrawPNG draws the latency distribution and the heartbeat-capacity curve
// side by side into path.
func DrawPNG(path string, r *Results) error {
	var row []*plot.Plot
	if r.Latency != nil {
		p, err := latencyPlot(r.Latency)
		if err != nil {
			return err
		}
		row = append(row, p)
	}
	if r.Capacity != nil && len(r.Capacity.Runs) > 0 {
		a, b, err := capacityPlots(r.Capacity)
		if err != nil {
			return err
		}
		row = append(row, a, b)
	}
	if len(row) == 0 {
		return fmt.Errorf("draw %s: nothing to draw", path)
	}
	const w, h = 5.2 * vg.Inch, 4.4 * vg.Inch
	img := vgimg.NewWith(vgimg.UseWH(vg.Length(len(row))*w, h), vgimg.UseDPI(110))
	dc := draw.New(img)
	tiles := draw.Tiles{Rows: 1, Cols: len(row), PadX: vg.Millimeter * 4, PadTop: vg.Millimeter * 2,
		PadBottom: vg.Millimeter * 2, PadLeft: vg.Millimeter * 2, PadRight: vg.Millimeter * 2}
	canvases := plot.Align([][]*plot.Plot{row}, tiles, dc)
	for i, p := range row {
		p.Draw(canvases[0][i])
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func latencyPlot(l *LatencyResult) (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = fmt.Sprintf("Latency, DynamoDB Local (%d rounds)", l.Samples)
	p.X.Label.Text = "milliseconds (log scale)"
	p.Y.Label.Text = "fraction of calls at or below"
	p.X.Scale = plot.LogScale{}
	p.X.Tick.Marker = plot.LogTicks{Prec: -1}
	p.Y.Min, p.Y.Max = 0, 1
	p.Legend.Top = false
	p.Legend.Left = false
	p.Legend.XOffs = -vg.Millimeter
	p.Legend.YOffs = vg.Millimeter * 6
	p.Add(plotter.NewGrid())
	for i, op := range l.Ops {
		n := len(op.D)
		if n == 0 {
			continue
		}
		step := max(n/400, 1)
		var xys plotter.XYs
		for j := 0; j < n; j += step {
			xys = append(xys, plotter.XY{X: msf(op.D[j]), Y: float64(j+1) / float64(n)})
		}
		xys = append(xys, plotter.XY{X: msf(op.D[n-1]), Y: 1})
		line, err := plotter.NewLine(xys)
		if err != nil {
			return nil, err
		}
		line.Color = plotutil.Color(i)
		line.Width = vg.Points(1.5)
		if op.Raw {
			line.Dashes = []vg.Length{vg.Points(5), vg.Points(3)}
			line.Color = color.Black
			if op.Name == OpRawGet {
				line.Color = color.Gray{Y: 120}
			}
		}
		p.Add(line)
		p.Legend.Add(fmt.Sprintf("%s (p50 %s ms)", op.Name, ms(op.D.Q(0.5))), line)
	}
	return p, nil
}

func msf(d time.Duration) float64 { return max(float64(d)/float64(time.Millisecond), 0.01) }

func capacityPlots(c *CapacityResult) (*plot.Plot, *plot.Plot, error) {
	runs := slices.Clone(c.Runs)
	slices.SortFunc(runs, func(a, b *CapacityRun) int { return a.N - b.N })
	lease, hb := runs[0].Lease, runs[0].Heartbeat
	maxN := float64(runs[len(runs)-1].N)

	rate := plot.New()
	rate.Title.Text = fmt.Sprintf("Heartbeats: one client, lease %s, heartbeat %s", lease, hb)
	rate.X.Label.Text = "locks held"
	rate.Y.Label.Text = "successful heartbeats per second"
	rate.Legend.Top = true
	rate.Legend.Left = true
	rate.Add(plotter.NewGrid())
	var got, lost plotter.XYs
	for _, r := range runs {
		pt := plotter.XY{X: float64(r.N), Y: r.BeatsPerSec()}
		got = append(got, pt)
		if !r.OK() {
			lost = append(lost, pt)
		}
	}
	if err := addRef(rate, "nominal: N / heartbeat", []plotter.XY{{X: 0, Y: 0}, {X: maxN, Y: maxN / hb.Seconds()}}, plotutil.Color(1), true); err != nil {
		return nil, nil, err
	}
	if err := addRef(rate, "needed to keep every lease: N / lease", []plotter.XY{{X: 0, Y: 0}, {X: maxN, Y: maxN / lease.Seconds()}}, plotutil.Color(2), true); err != nil {
		return nil, nil, err
	}
	if c.Ceiling != nil {
		which := ""
		if c.Ceiling.After != nil {
			which = " (higher of before/after)"
		}
		if err := addRef(rate, fmt.Sprintf("backend ceiling: %s raw writes/s%s", commas(int64(c.Ceiling.BoundPerSec())), which),
			[]plotter.XY{{X: 0, Y: c.Ceiling.BoundPerSec()}, {X: maxN, Y: c.Ceiling.BoundPerSec()}}, color.Gray{Y: 100}, true); err != nil {
			return nil, nil, err
		}
	}
	l, s, err := plotter.NewLinePoints(got)
	if err != nil {
		return nil, nil, err
	}
	l.Color, s.Color, l.Width = plotutil.Color(0), plotutil.Color(0), vg.Points(2)
	rate.Add(l, s)
	rate.Legend.Add("achieved", l, s)
	if err := addLost(rate, lost); err != nil {
		return nil, nil, err
	}

	gap := plot.New()
	gap.Title.Text = "Longest time a lock went unrenewed (top: lost)"
	gap.X.Label.Text = "locks held"
	gap.Y.Label.Text = "seconds between successful renewals"
	gap.Y.Min = 0
	gap.Add(plotter.NewGrid())
	// Gaps of lost locks grow without bound: clip the axis at twice the
	// lease and draw those points at its top.
	top := 2 * lease.Seconds()
	var gmax, gp99, glost plotter.XYs
	for _, r := range runs {
		gmax = append(gmax, plotter.XY{X: float64(r.N), Y: min(r.GapMax.Seconds(), top)})
		gp99 = append(gp99, plotter.XY{X: float64(r.N), Y: min(r.GapP99.Seconds(), top)})
		if !r.OK() {
			glost = append(glost, plotter.XY{X: float64(r.N), Y: min(r.GapMax.Seconds(), top)})
		}
	}
	gap.Legend.Top = true
	gap.Legend.Left = true
	if err := addRef(gap, fmt.Sprintf("lease (%s): a longer gap loses the lock", lease), []plotter.XY{{X: 0, Y: lease.Seconds()}, {X: maxN, Y: lease.Seconds()}}, color.RGBA{R: 200, A: 255}, true); err != nil {
		return nil, nil, err
	}
	if err := addRef(gap, fmt.Sprintf("heartbeat period (%s)", hb), []plotter.XY{{X: 0, Y: hb.Seconds()}, {X: maxN, Y: hb.Seconds()}}, color.Gray{Y: 100}, true); err != nil {
		return nil, nil, err
	}
	for i, series := range []struct {
		name string
		xys  plotter.XYs
	}{{"max", gmax}, {"p99", gp99}} {
		l, s, err := plotter.NewLinePoints(series.xys)
		if err != nil {
			return nil, nil, err
		}
		l.Color, s.Color, l.Width = plotutil.Color(i*3), plotutil.Color(i*3), vg.Points(2)
		gap.Add(l, s)
		gap.Legend.Add(series.name, l, s)
	}
	if err := addLost(gap, glost); err != nil {
		return nil, nil, err
	}
	gap.Y.Max = top
	return rate, gap, nil
}

func addRef(p *plot.Plot, name string, xys plotter.XYs, c color.Color, dashed bool) error {
	l, err := plotter.NewLine(xys)
	if err != nil {
		return err
	}
	l.Color = c
	if dashed {
		l.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
	}
	p.Add(l)
	p.Legend.Add(name, l)
	return nil
}

func addLost(p *plot.Plot, xys plotter.XYs) error {
	if len(xys) == 0 {
		return nil
	}
	s, err := plotter.NewScatter(xys)
	if err != nil {
		return err
	}
	s.Shape = draw.CrossGlyph{}
	s.Radius = vg.Points(6)
	s.Color = color.RGBA{R: 220, A: 255}
	p.Add(s)
	p.Legend.Add("locks lost", s)
	return nil
}
