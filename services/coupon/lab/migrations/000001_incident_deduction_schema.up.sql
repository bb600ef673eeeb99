-- The incident's schema, for the lab's own databases only: coupon_deduction
-- without the per-order unique key, as it was when incident 1 happened. On
-- it, nothing in the database stops a second ledger row for an order, so the
-- broken deduction reproduces the incident instead of being refused by the
-- key; the fixed deduction must hold on it by its code alone. The reconciler
-- still finds orders by order_no, through the plain index.
ALTER TABLE coupon_deduction
  DROP INDEX uk_coupon_deduction_order,
  ADD KEY idx_coupon_deduction_order (order_no);
