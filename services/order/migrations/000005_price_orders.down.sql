ALTER TABLE order_items DROP COLUMN name;
ALTER TABLE orders
  DROP KEY idx_orders_status_created,
  DROP COLUMN cancel_reason,
  DROP COLUMN cancelled_at,
  DROP COLUMN discount_amount,
  DROP COLUMN total_amount;
ALTER TABLE orders
  CHANGE COLUMN pay_amount amount BIGINT NOT NULL COMMENT 'total in cents';
