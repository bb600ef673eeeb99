-- stock_reservation is the stock one order holds of one product: written
-- RESERVED in the order's transaction, then CONFIRMED in the transaction
-- that marks the order paid, or RELEASED (its units back in product_stock)
-- in the one that cancels it. Both moves are conditional updates from
-- RESERVED, so each happens once. The unique key keeps one reservation per
-- (order, product).
CREATE TABLE stock_reservation (
  id          BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
  order_no    VARCHAR(64)     NOT NULL,
  product_id  BIGINT UNSIGNED NOT NULL,
  quantity    INT             NOT NULL,
  status      VARCHAR(16)     NOT NULL COMMENT 'RESERVED, CONFIRMED, RELEASED',
  created_at  DATETIME(3)     NOT NULL,
  updated_at  DATETIME(3)     NOT NULL,
  PRIMARY KEY (id),
  UNIQUE KEY uk_stock_reservation_order_product (order_no, product_id),
  KEY idx_stock_reservation_product (product_id, status)
) ENGINE=InnoDB;
