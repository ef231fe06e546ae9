package main

import (
	"fmt"
	"image"
	"image/color"
	"image/draw"
	"image/png"
	"os"
	"slices"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"golang.org/x/image/font"
	"golang.org/x/image/font/gofont/gobold"
	"golang.org/x/image/font/gofont/goregular"
	"golang.org/x/image/font/opentype"
	"golang.org/x/image/math/fixed"
)

// The picture: one row per span, indented by depth, its bar on a common
// time axis; the acquisition's events as numbered marks, explained below.

const (
	width    = 1500
	labelW   = 470
	durW     = 90
	rowH     = 24
	top      = 96
	barInset = 5
)

var (
	white    = color.RGBA{255, 255, 255, 255}
	ink      = color.RGBA{33, 33, 33, 255}
	faint    = color.RGBA{225, 225, 225, 255}
	grey     = color.RGBA{110, 110, 110, 255}
	appC     = color.RGBA{76, 160, 90, 255}
	lockC    = color.RGBA{52, 101, 200, 255}
	dynamoC  = color.RGBA{236, 152, 40, 255}
	failedC  = color.RGBA{200, 60, 50, 255}
	markC    = color.RGBA{150, 40, 150, 255}
	zebraC   = color.RGBA{247, 247, 250, 255}
	requestC = color.RGBA{120, 120, 120, 255}
)

type row struct {
	s     sdktrace.ReadOnlySpan
	depth int
}

func render(path string, spans []sdktrace.ReadOnlySpan) error {
	rows, start, end := layout(spans)
	if len(rows) == 0 {
		return fmt.Errorf("no spans")
	}
	regular, bold, err := faces()
	if err != nil {
		return err
	}
	var acquire sdktrace.ReadOnlySpan
	for _, r := range rows {
		if r.s.Name() == "dynamolock.acquire" {
			acquire = r.s
		}
	}
	var marks []sdktrace.Event
	if acquire != nil {
		marks = acquire.Events()
	}
	height := top + len(rows)*rowH + 40 + 22*(len(marks)+1) + 20
	img := image.NewRGBA(image.Rect(0, 0, width, height))
	draw.Draw(img, img.Bounds(), &image.Uniform{white}, image.Point{}, draw.Src)

	total := end.Sub(start)
	x := func(t time.Time) int {
		return labelW + int(float64(width-labelW-durW-10)*float64(t.Sub(start))/float64(total))
	}
	text(img, bold, 12, 24, ink, "A contended acquisition, traced: dynamolock.acquire waits behind another owner, then takes the lock it releases")
	if acquire != nil {
		a := attrs(acquire.Attributes())
		text(img, regular, 12, 46, grey, fmt.Sprintf("dynamolock.acquire: key=%s  outcome=%s  attempts=%s  contended=%s  fencing_token=%s  (DynamoDB Local; the DynamoDB spans are client spans named as the AWS SDK's instrumentation names them)",
			a["dynamolock.key"], a["dynamolock.outcome"], a["dynamolock.attempts"], a["dynamolock.contended"], a["dynamolock.fencing_token"]))
	}
	// Time axis: a tick every step.
	step := niceStep(total)
	for t := time.Duration(0); t <= total; t += step {
		px := x(start.Add(t))
		vline(img, px, top-8, top+len(rows)*rowH, faint)
		text(img, regular, px-12, top-14, grey, fmt.Sprintf("%d ms", t.Milliseconds()))
	}
	for i, r := range rows {
		y := top + i*rowH
		if i%2 == 1 {
			fill(img, image.Rect(0, y, width, y+rowH), zebraC)
		}
		c, label := style(r.s)
		text(img, regular, 12+16*r.depth, y+rowH-8, ink, label)
		x0, x1 := x(r.s.StartTime()), x(r.s.EndTime())
		if x1-x0 < 2 {
			x1 = x0 + 2
		}
		fill(img, image.Rect(x0, y+barInset, x1, y+rowH-barInset), c)
		text(img, regular, width-durW+6, y+rowH-8, grey, dur(r.s.EndTime().Sub(r.s.StartTime())))
		if acquire != nil && r.s.SpanContext().SpanID() == acquire.SpanContext().SpanID() {
			for n, ev := range marks {
				mx := x(ev.Time)
				diamond(img, mx, y+rowH/2, 6, markC)
				text(img, bold, mx-3, y-1, markC, fmt.Sprint(n+1))
			}
		}
	}
	y := top + len(rows)*rowH + 30
	legend := []struct {
		c    color.RGBA
		what string
	}{{requestC, "the application's request"}, {appC, "work under the lock"}, {lockC, "dynamolock spans"}, {dynamoC, "DynamoDB calls"}, {failedC, "a call that failed (the conditional write that found the lock held)"}}
	lx := 12
	for _, l := range legend {
		fill(img, image.Rect(lx, y-10, lx+14, y+2), l.c)
		text(img, regular, lx+20, y, ink, l.what)
		lx += 30 + font.MeasureString(regular, l.what).Ceil()
	}
	for n, ev := range marks {
		y += 22
		diamond(img, 18, y-4, 6, markC)
		text(img, bold, 30, y, markC, fmt.Sprint(n+1))
		text(img, regular, 46, y, ink, fmt.Sprintf("%s at %s: %s", ev.Name, dur(ev.Time.Sub(start)), describe(ev)))
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := png.Encode(f, img); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// layout orders the spans of the request's trace depth first, children by
// start time, and returns the trace's first start and last end.
func layout(spans []sdktrace.ReadOnlySpan) ([]row, time.Time, time.Time) {
	var root sdktrace.ReadOnlySpan
	for _, s := range spans {
		if strings.HasPrefix(s.Name(), "POST ") {
			root = s
		}
	}
	if root == nil {
		return nil, time.Time{}, time.Time{}
	}
	children := map[trace.SpanID][]sdktrace.ReadOnlySpan{}
	for _, s := range spans {
		if s.SpanContext().TraceID() == root.SpanContext().TraceID() && s.Parent().IsValid() {
			children[s.Parent().SpanID()] = append(children[s.Parent().SpanID()], s)
		}
	}
	var rows []row
	var walk func(s sdktrace.ReadOnlySpan, depth int)
	walk = func(s sdktrace.ReadOnlySpan, depth int) {
		rows = append(rows, row{s, depth})
		kids := children[s.SpanContext().SpanID()]
		slices.SortFunc(kids, func(a, b sdktrace.ReadOnlySpan) int { return a.StartTime().Compare(b.StartTime()) })
		for _, k := range kids {
			walk(k, depth+1)
		}
	}
	walk(root, 0)
	return rows, root.StartTime(), root.EndTime()
}

// style is a span's colour and label.
func style(s sdktrace.ReadOnlySpan) (color.RGBA, string) {
	a := attrs(s.Attributes())
	switch {
	case s.Status().Code == codes.Error:
		return failedC, s.Name() + " (ConditionalCheckFailed: held)"
	case strings.HasPrefix(s.Name(), "DynamoDB."):
		return dynamoC, s.Name()
	case s.Name() == "dynamolock.acquire":
		return lockC, fmt.Sprintf("dynamolock.acquire  key=%s", a["dynamolock.key"])
	case s.Name() == "dynamolock.release":
		return lockC, fmt.Sprintf("dynamolock.release  outcome=%s", a["dynamolock.outcome"])
	case strings.HasPrefix(s.Name(), "dynamolock."):
		return lockC, s.Name()
	case strings.HasPrefix(s.Name(), "POST "):
		return requestC, s.Name()
	}
	return appC, s.Name()
}

func describe(ev sdktrace.Event) string {
	a := attrs(ev.Attributes)
	switch ev.Name {
	case "dynamolock.wait":
		return fmt.Sprintf("waits behind %s (fencing token %s, lease %s s), at most %s s more if it stopped renewing",
			a["dynamolock.holder.owner"], a["dynamolock.holder.fencing_token"], a["dynamolock.holder.lease"], trim(a["dynamolock.wait.expected"]))
	case "dynamolock.handover":
		return fmt.Sprintf("%s released it; this call writes to take it (same process: %s)", a["dynamolock.holder.owner"], a["dynamolock.holder.same_process"])
	case "dynamolock.takeover":
		return fmt.Sprintf("takes over %s, unchanged for %s s", a["dynamolock.holder.owner"], trim(a["dynamolock.holder.unchanged_for"]))
	}
	return ""
}

func trim(s string) string {
	if i := strings.Index(s, "."); i >= 0 && len(s) > i+3 {
		return s[:i+3]
	}
	return s
}

func attrs(kvs []attribute.KeyValue) map[string]string {
	m := map[string]string{}
	for _, kv := range kvs {
		m[string(kv.Key)] = kv.Value.String()
	}
	return m
}

func dur(d time.Duration) string {
	if d < 10*time.Millisecond {
		return fmt.Sprintf("%.2f ms", float64(d)/float64(time.Millisecond))
	}
	return fmt.Sprintf("%.1f ms", float64(d)/float64(time.Millisecond))
}

func niceStep(total time.Duration) time.Duration {
	for _, s := range []time.Duration{10, 20, 25, 50, 100, 200, 250, 500, 1000, 2000, 5000} {
		if total/(s*time.Millisecond) <= 12 {
			return s * time.Millisecond
		}
	}
	return 10 * time.Second
}

func faces() (regular, bold font.Face, err error) {
	face := func(ttf []byte) (font.Face, error) {
		f, err := opentype.Parse(ttf)
		if err != nil {
			return nil, err
		}
		return opentype.NewFace(f, &opentype.FaceOptions{Size: 13, DPI: 72, Hinting: font.HintingFull})
	}
	if regular, err = face(goregular.TTF); err != nil {
		return nil, nil, err
	}
	bold, err = face(gobold.TTF)
	return regular, bold, err
}

func text(img *image.RGBA, face font.Face, x, y int, c color.Color, s string) {
	d := font.Drawer{Dst: img, Src: image.NewUniform(c), Face: face, Dot: fixed.P(x, y)}
	d.DrawString(s)
}

func fill(img *image.RGBA, r image.Rectangle, c color.Color) {
	draw.Draw(img, r, &image.Uniform{c}, image.Point{}, draw.Src)
}

func vline(img *image.RGBA, x, y0, y1 int, c color.Color) {
	fill(img, image.Rect(x, y0, x+1, y1), c)
}

func diamond(img *image.RGBA, cx, cy, r int, c color.Color) {
	for dy := -r; dy <= r; dy++ {
		w := r - abs(dy)
		fill(img, image.Rect(cx-w, cy+dy, cx+w+1, cy+dy+1), c)
	}
}

func abs(v int) int {
	if v < 0 {
		return -v
	}
	return v
}
