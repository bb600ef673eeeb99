package database

import (
	"context"
	"errors"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/logger"
)

// lazyTrace wraps a gorm logger so that a statement's SQL is rendered only
// when it will be logged. gorm's slog logger renders every statement with
// its values inlined (logger.ExplainSQL) before deciding whether to log it;
// for a multi-row insert of a hundred products or an outbox UPDATE listing
// two thousand ids that rendering cost more CPU than building the statement
// itself (about 15 % of the order service's CPU in the batch-copy benchmark).
type lazyTrace struct {
	logger.Interface
	level          logger.LogLevel
	slow           time.Duration
	ignoreNotFound bool
}

func newLazyTrace(inner logger.Interface, cfg logger.Config) logger.Interface {
	return lazyTrace{Interface: inner, level: cfg.LogLevel, slow: cfg.SlowThreshold, ignoreNotFound: cfg.IgnoreRecordNotFoundError}
}

// LogMode keeps the wrapper around the re-levelled logger (store code calls
// it to silence an expected duplicate-key error).
func (l lazyTrace) LogMode(level logger.LogLevel) logger.Interface {
	l.Interface = l.Interface.LogMode(level)
	l.level = level
	return l
}

// Trace hands the statement to the wrapped logger only when that logger
// would log it: an error it does not ignore, a slow statement, or Info level.
func (l lazyTrace) Trace(ctx context.Context, begin time.Time, fc func() (string, int64), err error) {
	if l.level <= logger.Silent {
		return
	}
	failed := err != nil && !(l.ignoreNotFound && errors.Is(err, gorm.ErrRecordNotFound))
	slow := l.slow != 0 && time.Since(begin) > l.slow
	if !failed && !slow && l.level < logger.Info {
		return
	}
	l.Interface.Trace(ctx, begin, fc, err)
}

// ParamsFilter passes through to the wrapped logger when it filters.
func (l lazyTrace) ParamsFilter(ctx context.Context, sql string, params ...any) (string, []any) {
	if f, ok := l.Interface.(gorm.ParamsFilter); ok {
		return f.ParamsFilter(ctx, sql, params...)
	}
	return sql, params
}
