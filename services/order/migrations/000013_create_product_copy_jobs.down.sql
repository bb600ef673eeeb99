DROP TABLE IF EXISTS product_copy_chunks;
DROP TABLE IF EXISTS product_copy_jobs;
