-- product_templates is the default product data a batch copy creates
-- products from, selected by source brand or by id.
CREATE TABLE product_templates (
  id          BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
  brand       VARCHAR(64)     NOT NULL,
  name        VARCHAR(130)    NOT NULL COLLATE utf8mb4_bin,
  model       VARCHAR(255)    NOT NULL COLLATE utf8mb4_bin,
  price       BIGINT          NOT NULL COMMENT 'cents',
  created_at  DATETIME(3)     NOT NULL,
  PRIMARY KEY (id),
  KEY idx_product_templates_brand (brand, id)
) ENGINE=InnoDB;
