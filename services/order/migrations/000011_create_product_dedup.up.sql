-- product_dedup holds one row per LIVE product, keyed by (name, model). It is
-- written in the same transaction as the product insert and physically
-- deleted in the same transaction as the product's logical deletion, so the
-- unique key guards live products only and a deleted product can be created
-- again (incident 3).
CREATE TABLE product_dedup (
  product_id  BIGINT UNSIGNED NOT NULL,
  name        VARCHAR(130)    NOT NULL COLLATE utf8mb4_bin,
  model       VARCHAR(255)    NOT NULL COLLATE utf8mb4_bin,
  created_at  DATETIME(3)     NOT NULL,
  PRIMARY KEY (product_id),
  UNIQUE KEY uk_product_dedup_name_model (name, model)
) ENGINE=InnoDB;
