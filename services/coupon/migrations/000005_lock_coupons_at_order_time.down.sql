ALTER TABLE coupon_message
  DROP KEY idx_coupon_message_failure,
  DROP COLUMN failure_reason;

ALTER TABLE coupons
  DROP KEY idx_coupons_lock_deadline,
  DROP KEY uk_coupons_locked_order,
  DROP COLUMN expires_at,
  DROP COLUMN locked_until,
  DROP COLUMN locked_order_no,
  MODIFY COLUMN status VARCHAR(16) NOT NULL COMMENT 'UNUSED, USED';

ALTER TABLE coupon_template
  DROP COLUMN valid_days;
