DROP TABLE IF EXISTS product_dedup;
