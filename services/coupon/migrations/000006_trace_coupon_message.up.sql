-- trace_headers keeps the trace of the order.paid delivery that landed the
-- message (the W3C traceparent and baggage, as JSON, the form of an outbox
-- row's headers), so that the retry job's deduction, however much later it
-- runs, is a span of the purchase's trace. Empty when tracing is off.
ALTER TABLE coupon_message
  ADD COLUMN trace_headers VARCHAR(1024) NOT NULL DEFAULT '' COMMENT 'trace of the delivery that landed it, JSON' AFTER failure_reason;
