ALTER TABLE orders DROP KEY idx_orders_status_updated;
