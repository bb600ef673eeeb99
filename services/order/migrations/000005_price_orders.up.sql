-- Orders are priced from the catalog (issue "a real purchase"): the items'
-- total, the coupon's discount and what the customer pays are kept apart,
-- and each item snapshots the product's name beside its unit price. The old
-- amount column was what the customer paid, so it becomes pay_amount and the
-- total of the orders written before this migration is that amount (they had
-- no discount). cancelled_at and cancel_reason record how an order closed.
ALTER TABLE orders
  CHANGE COLUMN amount pay_amount BIGINT NOT NULL COMMENT 'what the customer pays, in cents: total_amount - discount_amount';
ALTER TABLE orders
  ADD COLUMN total_amount BIGINT NOT NULL DEFAULT 0 COMMENT 'the items at their snapshot prices, in cents' AFTER user_id;
ALTER TABLE orders
  ADD COLUMN discount_amount BIGINT NOT NULL DEFAULT 0 COMMENT 'the locked coupon''s discount, in cents' AFTER total_amount,
  ADD COLUMN cancelled_at DATETIME(3) NULL AFTER paid_at,
  ADD COLUMN cancel_reason VARCHAR(16) NULL COMMENT 'timeout or customer' AFTER cancelled_at,
  -- The order-close job looks for WAIT_PAY orders by age.
  ADD KEY idx_orders_status_created (status, created_at);
UPDATE orders SET total_amount = pay_amount;
ALTER TABLE order_items
  ADD COLUMN name VARCHAR(130) NOT NULL DEFAULT '' COLLATE utf8mb4_bin COMMENT 'the product name when ordered' AFTER product_id;
