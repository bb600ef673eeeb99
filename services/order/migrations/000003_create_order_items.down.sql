DROP TABLE IF EXISTS order_items;
