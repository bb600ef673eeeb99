DROP TABLE IF EXISTS payment_transaction;
ALTER TABLE payments
  DROP INDEX uk_payments_order,
  ADD KEY idx_payments_order (order_no),
  DROP COLUMN paid_at,
  DROP COLUMN platform_serial,
  DROP COLUMN channel;
