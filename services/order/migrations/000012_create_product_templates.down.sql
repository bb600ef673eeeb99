DROP TABLE IF EXISTS product_templates;
