ALTER TABLE coupon_deduction
  DROP INDEX idx_coupon_deduction_order,
  ADD UNIQUE KEY uk_coupon_deduction_order (order_no);
