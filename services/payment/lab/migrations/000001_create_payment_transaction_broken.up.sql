-- payment_transaction_broken is the payment record of incident 2's broken
-- callback handler (PAYMENT_CALLBACK_MODE=broken): the columns of
-- payment_transaction WITHOUT its unique key on (channel, platform_serial),
-- so that every copy of a notification that slips past the handler's
-- read-then-write gets its own row. It is lab schema: the lab and the tests
-- that run the broken handler apply it, and the production migrations never
-- create it, so no deployment has a record table without the key.
CREATE TABLE payment_transaction_broken (
  id              BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
  channel         VARCHAR(32)     NOT NULL,
  platform_serial VARCHAR(64)     NOT NULL,
  out_trade_no    VARCHAR(64)     NOT NULL,
  amount          BIGINT          NOT NULL COMMENT 'cents, as notified',
  paid_at         DATETIME(3)     NOT NULL,
  created_at      DATETIME(3)     NOT NULL,
  PRIMARY KEY (id),
  KEY idx_payment_transaction_broken_out_trade_no (out_trade_no)
) ENGINE=InnoDB;
