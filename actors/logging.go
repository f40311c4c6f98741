package actors

import (
	"context"
	"log/slog"

	"github.com/hashicorp/go-hclog"
)

// slogHandler bridges protoactor-go's slog output into an hclog logger, so
// the actor system logs through the same sink, format and level as the rest
// of svc.
func slogHandler(l hclog.Logger) slog.Handler { return &slogBridge{log: l} }

type slogBridge struct {
	log   hclog.Logger
	attrs []any
	group string
}

func (b *slogBridge) Enabled(_ context.Context, lvl slog.Level) bool {
	switch {
	case lvl >= slog.LevelError:
		return b.log.IsError()
	case lvl >= slog.LevelWarn:
		return b.log.IsWarn()
	case lvl >= slog.LevelInfo:
		return b.log.IsInfo()
	default:
		return b.log.IsDebug()
	}
}

func (b *slogBridge) Handle(_ context.Context, r slog.Record) error {
	args := append([]any{}, b.attrs...)
	r.Attrs(func(a slog.Attr) bool {
		args = append(args, b.key(a.Key), a.Value.Resolve().Any())
		return true
	})
	switch {
	case r.Level >= slog.LevelError:
		b.log.Error(r.Message, args...)
	case r.Level >= slog.LevelWarn:
		b.log.Warn(r.Message, args...)
	case r.Level >= slog.LevelInfo:
		b.log.Info(r.Message, args...)
	default:
		b.log.Debug(r.Message, args...)
	}
	return nil
}

func (b *slogBridge) key(k string) string {
	if b.group == "" {
		return k
	}
	return b.group + "." + k
}

func (b *slogBridge) WithAttrs(attrs []slog.Attr) slog.Handler {
	n := &slogBridge{log: b.log, group: b.group, attrs: append([]any{}, b.attrs...)}
	for _, a := range attrs {
		n.attrs = append(n.attrs, b.key(a.Key), a.Value.Resolve().Any())
	}
	return n
}

func (b *slogBridge) WithGroup(name string) slog.Handler {
	g := name
	if b.group != "" {
		g = b.group + "." + name
	}
	return &slogBridge{log: b.log, attrs: b.attrs, group: g}
}
