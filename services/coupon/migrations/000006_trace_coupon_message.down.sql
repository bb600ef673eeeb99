ALTER TABLE coupon_message
  DROP COLUMN trace_headers;
