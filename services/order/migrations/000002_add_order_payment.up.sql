ALTER TABLE orders
  ADD COLUMN payment_no VARCHAR(64) NULL COMMENT 'the payment that paid the order' AFTER status,
  ADD COLUMN paid_at    DATETIME(3) NULL AFTER payment_no;
