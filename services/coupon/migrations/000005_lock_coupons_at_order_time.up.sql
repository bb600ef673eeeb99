-- Coupons are locked when the order is placed (UNUSED -> LOCKED), deducted
-- when it is paid (LOCKED -> USED) and released when it is cancelled, or
-- never committed (LOCKED -> UNUSED).
--
-- locked_order_no names the order that holds the lock, locked_until is its
-- deadline: past it, the sweeper asks the order service what became of the
-- order. Both are kept when the lock is used, as the record of the lock the
-- deduction consumed, and cleared when it is released. The unique key lets
-- an order hold one coupon at most.
--
-- expires_at is set once, when the coupon is issued, from its template's
-- valid_days: a coupon keeps the validity it was issued with whatever
-- happens to the template later, and the lock checks it on the row it locks.
-- Coupons issued before this migration get their template's default, 30
-- days from their issue.
ALTER TABLE coupon_template
  ADD COLUMN valid_days INT UNSIGNED NOT NULL DEFAULT 30 COMMENT 'days a coupon is valid from its issue' AFTER min_order_amount;

ALTER TABLE coupons
  ADD COLUMN locked_order_no VARCHAR(64) NULL AFTER status,
  ADD COLUMN locked_until    DATETIME(3) NULL AFTER locked_order_no,
  ADD COLUMN expires_at      DATETIME(3) NULL AFTER used_order_no,
  MODIFY COLUMN status VARCHAR(16) NOT NULL COMMENT 'UNUSED, LOCKED, USED',
  ADD UNIQUE KEY uk_coupons_locked_order (locked_order_no),
  ADD KEY idx_coupons_lock_deadline (status, locked_until);

UPDATE coupons SET expires_at = created_at + INTERVAL 30 DAY WHERE expires_at IS NULL;

ALTER TABLE coupons MODIFY COLUMN expires_at DATETIME(3) NOT NULL;

-- failure_reason is the stable label of a FAILED message's reason (the
-- label of coupon_messages_failed_total), so the reconciler can list the
-- paid orders whose coupon they did not hold without parsing last_error.
ALTER TABLE coupon_message
  ADD COLUMN failure_reason VARCHAR(32) NOT NULL DEFAULT '' AFTER last_error,
  ADD KEY idx_coupon_message_failure (status, failure_reason);
