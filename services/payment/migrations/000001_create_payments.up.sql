CREATE TABLE payments (
  id            BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
  out_trade_no  VARCHAR(64)     NOT NULL COMMENT 'our payment number, sent to the platform',
  order_no      VARCHAR(64)     NOT NULL,
  amount        BIGINT          NOT NULL COMMENT 'cents',
  status        VARCHAR(16)     NOT NULL COMMENT 'WAIT_PAY, PAID, CLOSED',
  created_at    DATETIME(3)     NOT NULL,
  updated_at    DATETIME(3)     NOT NULL,
  PRIMARY KEY (id),
  UNIQUE KEY uk_payments_out_trade_no (out_trade_no),
  KEY idx_payments_order (order_no)
) ENGINE=InnoDB;
