package app

import "time"

// SetClock makes the use cases read the time from now. It is compiled into
// the package's tests only, which move the clock past lock deadlines and
// expiries instead of waiting for them.
func (a *App) SetClock(now func() time.Time) { a.now = now }
