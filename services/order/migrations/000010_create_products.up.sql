-- products is the catalog. It uses logical deletion (deleted + deleted_at), as
-- the business rules require, so it cannot carry a unique key on
-- (name, model): a deleted row would block creating the product again.
-- Uniqueness of live products is kept by product_dedup (000011). Names and
-- models compare byte for byte (utf8mb4_bin) in every product table, so the
-- database and the code agree on what "the same product" is.
CREATE TABLE products (
  id          BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
  brand       VARCHAR(64)     NOT NULL,
  name        VARCHAR(130)    NOT NULL COLLATE utf8mb4_bin,
  model       VARCHAR(255)    NOT NULL COLLATE utf8mb4_bin,
  price       BIGINT          NOT NULL COMMENT 'cents',
  deleted     TINYINT(1)      NOT NULL DEFAULT 0,
  deleted_at  DATETIME(3)     NULL,
  created_at  DATETIME(3)     NOT NULL,
  updated_at  DATETIME(3)     NOT NULL,
  PRIMARY KEY (id),
  KEY idx_products_name_model (name, model, deleted),
  KEY idx_products_brand (brand, deleted, id)
) ENGINE=InnoDB;
