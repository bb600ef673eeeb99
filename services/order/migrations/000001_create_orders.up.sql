CREATE TABLE orders (
  id          BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
  order_no    VARCHAR(64)     NOT NULL,
  user_id     BIGINT UNSIGNED NOT NULL,
  amount      BIGINT          NOT NULL COMMENT 'total in cents',
  coupon_id   BIGINT UNSIGNED NULL,
  status      VARCHAR(16)     NOT NULL COMMENT 'WAIT_PAY, PAID, CANCELLED',
  created_at  DATETIME(3)     NOT NULL,
  updated_at  DATETIME(3)     NOT NULL,
  PRIMARY KEY (id),
  UNIQUE KEY uk_orders_order_no (order_no),
  KEY idx_orders_user (user_id, created_at)
) ENGINE=InnoDB;
