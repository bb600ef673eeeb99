-- coupon_deduction is the ledger of deductions: the business effect the
-- reconciler counts. One order has at most one row, and the unique key on
-- order_no makes the database refuse a second one inside its transaction:
-- the last line of the fix of incident 1 if the state machine above it is
-- ever wrong. (The incident's schema had no such key; the lab recreates it
-- with its own migration, services/coupon/lab/migrations, to run the broken
-- deduction as it ran then.)
CREATE TABLE coupon_deduction (
  id          BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
  order_no    VARCHAR(64)     NOT NULL,
  coupon_id   BIGINT UNSIGNED NOT NULL,
  user_id     BIGINT UNSIGNED NOT NULL,
  amount      BIGINT          NOT NULL COMMENT 'cents, from the template',
  message_id  VARCHAR(64)     NOT NULL COMMENT 'the order.paid event that caused it',
  created_at  DATETIME(3)     NOT NULL,
  PRIMARY KEY (id),
  UNIQUE KEY uk_coupon_deduction_order (order_no),
  KEY idx_coupon_deduction_coupon (coupon_id)
) ENGINE=InnoDB;
