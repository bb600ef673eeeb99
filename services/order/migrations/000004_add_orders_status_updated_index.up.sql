-- The reconciler looks for PAID orders by the time this service marked them
-- paid (status = 'PAID' AND updated_at >= ?); without this index every call
-- scans the table.
ALTER TABLE orders ADD KEY idx_orders_status_updated (status, updated_at);
