-- product_stock is what can still be sold of each product (incident 5).
-- available excludes the units reserved by open orders: placing an order
-- takes its units out with a conditional decrement
-- (available = available - n WHERE available >= n), cancelling it puts them
-- back. version grows with every write; the optimistic lab variant
-- compares it. The CHECK is a backstop for a write that would go below zero;
-- it cannot catch a lost update (incident 5's broken variant writes values
-- that are never negative and still sells more than it has).
CREATE TABLE product_stock (
  product_id  BIGINT UNSIGNED NOT NULL,
  available   INT             NOT NULL,
  version     BIGINT UNSIGNED NOT NULL DEFAULT 0,
  updated_at  DATETIME(3)     NOT NULL,
  PRIMARY KEY (product_id),
  CONSTRAINT chk_product_stock_available CHECK (available >= 0)
) ENGINE=InnoDB;
