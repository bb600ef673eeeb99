DROP TABLE product_stock;
