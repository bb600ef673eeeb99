CREATE TABLE order_items (
  id          BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
  order_no    VARCHAR(64)     NOT NULL,
  product_id  BIGINT UNSIGNED NOT NULL,
  quantity    INT             NOT NULL,
  unit_price  BIGINT          NOT NULL COMMENT 'cents',
  PRIMARY KEY (id),
  UNIQUE KEY uk_order_items_product (order_no, product_id)
) ENGINE=InnoDB;
