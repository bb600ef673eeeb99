-- coupon_lock_hold records which attempts of an order hold its coupon lock.
-- Concurrent copies of one request share the order number, and so the lock
-- (it is re-entrant per order number); when one copy fails and releases, the
-- coupon is freed only if no other attempt of that order holds it. A hold
-- lasts a short lease (COUPON_LOCK_HOLD_LEASE, longer than an order attempt
-- can live), so a crashed attempt never pins the coupon past it, and an
-- order that committed needs its holds no longer. The sweep job deletes
-- expired holds in bounded batches.
CREATE TABLE coupon_lock_hold (
  coupon_id  BIGINT UNSIGNED NOT NULL,
  order_no   VARCHAR(64)     NOT NULL,
  attempt    VARCHAR(64)     NOT NULL,
  held_at    DATETIME(3)     NOT NULL,
  expires_at DATETIME(3)     NOT NULL,
  PRIMARY KEY (coupon_id, order_no, attempt),
  KEY idx_coupon_lock_hold_expiry (expires_at)
) ENGINE=InnoDB;
