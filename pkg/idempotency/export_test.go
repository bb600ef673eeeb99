package idempotency

// SetAfterReadHook lets the tests hold claims between their read and their
// conditional update.
func (s *Store) SetAfterReadHook(f func()) { s.afterRead = f }
