-- coupon_deduction is the ledger of deductions: the business effect the
-- reconciler counts. One order must have at most one row.
--
-- The schema is shared by the fixed and the broken deduction (incident 1), so
-- the "unique per order" key cannot sit on order_no itself, or the database
-- would quietly fix the broken variant. Instead order_guard carries the unique
-- key: the fixed path fills it with the order number, so a second deduction
-- for the same order fails with a duplicate key inside its transaction; the
-- broken path leaves it NULL, and a MySQL unique index ignores NULLs, so the
-- broken path behaves exactly as the incident's schema did (no such key).
CREATE TABLE coupon_deduction (
  id          BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
  order_no    VARCHAR(64)     NOT NULL,
  coupon_id   BIGINT UNSIGNED NOT NULL,
  user_id     BIGINT UNSIGNED NOT NULL,
  amount      BIGINT          NOT NULL COMMENT 'cents, from the template',
  message_id  VARCHAR(64)     NOT NULL COMMENT 'the order.paid event that caused it',
  mode        VARCHAR(8)      NOT NULL COMMENT 'fixed or broken: which code path wrote it',
  order_guard VARCHAR(64)     NULL COMMENT 'order_no when written by the fixed path, NULL from the broken one',
  created_at  DATETIME(3)     NOT NULL,
  PRIMARY KEY (id),
  UNIQUE KEY uk_coupon_deduction_order_guard (order_guard),
  KEY idx_coupon_deduction_order (order_no),
  KEY idx_coupon_deduction_coupon (coupon_id)
) ENGINE=InnoDB;
