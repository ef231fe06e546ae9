package dynamolock

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"time"
)

// Logger is the dynamolock v2 logging interface: any value with Println,
// such as *log.Logger. See [WithLogger].
type Logger interface {
	Println(v ...any)
}

// ContextLogger is the dynamolock v2 context-aware logging interface. See
// [WithContextLogger].
type ContextLogger interface {
	Println(ctx context.Context, v ...any)
}

// printlnHandler adapts the v2 Println interfaces to log/slog, so the client
// logs in one way only. Each record becomes one line: "msg key=value ...".
type printlnHandler struct {
	println    func(ctx any, s string)
	ctxPrintln func(ctx context.Context, v ...any)
	attrs      []slog.Attr
	group      string
}

func (h *printlnHandler) Enabled(context.Context, slog.Level) bool { return true }

func (h *printlnHandler) Handle(ctx context.Context, r slog.Record) error {
	var b strings.Builder
	b.WriteString("dynamolock: ")
	b.WriteString(r.Message)
	write := func(a slog.Attr) bool {
		if a.Equal(slog.Attr{}) {
			return true
		}
		key := a.Key
		if h.group != "" {
			key = h.group + "." + key
		}
		fmt.Fprintf(&b, " %s=%v", key, a.Value.Resolve())
		return true
	}
	for _, a := range h.attrs {
		write(a)
	}
	r.Attrs(write)
	if h.ctxPrintln != nil {
		h.ctxPrintln(ctx, b.String())
	} else {
		h.println(ctx, b.String())
	}
	return nil
}

func (h *printlnHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	c := *h
	c.attrs = append(append([]slog.Attr(nil), h.attrs...), attrs...)
	return &c
}

func (h *printlnHandler) WithGroup(name string) slog.Handler {
	c := *h
	if c.group != "" {
		name = c.group + "." + name
	}
	c.group = name
	return &c
}

// Stable slog keys: key, sortKey, owner, rvn, fencingToken, err.
func slogKey(k string) slog.Attr                       { return slog.String("key", k) }
func slogOwner(o string) slog.Attr                     { return slog.String("owner", o) }
func slogRVN(v string) slog.Attr                       { return slog.String("rvn", v) }
func slogErr(err error) slog.Attr                      { return slog.Any("err", err) }
func slogDuration(k string, d time.Duration) slog.Attr { return slog.Duration(k, d) }

// log writes a record about l, followed by extra. Attributes are built only
// when the logger would keep the record: the default logger discards all.
func (l *Lock) log(level slog.Level, msg string, extra ...slog.Attr) {
	lg := l.client.cfg.logger
	if !lg.Enabled(context.Background(), level) {
		return
	}
	l.mu.Lock()
	attrs := append(make([]slog.Attr, 0, 5+len(extra)),
		slogKey(l.partitionKey), slogOwner(l.ownerName), slogRVN(l.rvn), slog.Uint64("fencingToken", l.fencingToken))
	l.mu.Unlock()
	if l.sortKey != nil {
		attrs = append(attrs, slog.String("sortKey", *l.sortKey))
	}
	lg.LogAttrs(context.Background(), level, msg, append(attrs, extra...)...)
}
