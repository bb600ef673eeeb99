-- coupon_lock_release records that an order attempt gave up on its coupon
-- lock (POST /internal/coupons/{id}/release), whether or not the lock had
-- landed. A lock request of that same attempt arriving later, delayed on the
-- network, finds the record and is refused, in the transaction that would
-- have taken the lock: a released attempt never holds the coupon. attempt
-- tells one try of an order number from the next (a retry with the same
-- Idempotency-Key keeps its order number), so a retry can still lock.
--
-- A record is kept for the lock TTL (expires_at); no lock request is late
-- by that much, and past it the sweeper would release such a lock anyway.
-- The sweep job deletes expired records in bounded batches.
CREATE TABLE coupon_lock_release (
  coupon_id   BIGINT UNSIGNED NOT NULL,
  order_no    VARCHAR(64)     NOT NULL,
  attempt     VARCHAR(64)     NOT NULL,
  released_at DATETIME(3)     NOT NULL,
  expires_at  DATETIME(3)     NOT NULL,
  PRIMARY KEY (coupon_id, order_no, attempt),
  KEY idx_coupon_lock_release_expiry (expires_at)
) ENGINE=InnoDB;
