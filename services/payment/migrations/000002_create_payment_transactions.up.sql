-- The platform transaction that paid a payment, recorded on the payment itself.
ALTER TABLE payments
  ADD COLUMN channel         VARCHAR(32) NOT NULL DEFAULT '' COMMENT 'platform that paid it' AFTER status,
  ADD COLUMN platform_serial VARCHAR(64) NOT NULL DEFAULT '' COMMENT 'platform transaction that paid it' AFTER channel,
  ADD COLUMN paid_at         DATETIME(3) NULL AFTER platform_serial,
  -- One payment per order: a second create for the same order finds the first.
  DROP INDEX idx_payments_order,
  ADD UNIQUE KEY uk_payments_order (order_no);

-- payment_transaction is the payment record of every platform transaction
-- the callback handler applies. The unique key on (channel, platform_serial)
-- is the last line of defense: a redelivered notification fails to insert
-- and is answered as already processed.
CREATE TABLE payment_transaction (
  id              BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
  channel         VARCHAR(32)     NOT NULL,
  platform_serial VARCHAR(64)     NOT NULL,
  out_trade_no    VARCHAR(64)     NOT NULL,
  amount          BIGINT          NOT NULL COMMENT 'cents, as notified',
  paid_at         DATETIME(3)     NOT NULL,
  created_at      DATETIME(3)     NOT NULL,
  PRIMARY KEY (id),
  UNIQUE KEY uk_payment_transaction_serial (channel, platform_serial),
  KEY idx_payment_transaction_out_trade_no (out_trade_no)
) ENGINE=InnoDB;
