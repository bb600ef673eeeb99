ALTER TABLE orders DROP COLUMN paid_at, DROP COLUMN payment_no;
