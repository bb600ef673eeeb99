DROP TABLE IF EXISTS refund;
ALTER TABLE payments
  DROP KEY idx_payments_status_created,
  DROP COLUMN queried_at,
  DROP COLUMN cancel_reason,
  DROP COLUMN order_cancelled_at,
  DROP COLUMN user_id;
