-- The order's owner (only they may see the payment), the order's
-- cancellation as order.cancelled reported it (for the reconciler), and when
-- the platform was last asked about a payment still waiting (the
-- payment-query job takes the least recently asked first).
ALTER TABLE payments
  ADD COLUMN user_id            BIGINT UNSIGNED NOT NULL DEFAULT 0 COMMENT 'the order''s owner; 0 for a placeholder inserted by a close' AFTER order_no,
  ADD COLUMN order_cancelled_at DATETIME(3)     NULL COMMENT 'order.cancelled recorded' AFTER paid_at,
  ADD COLUMN cancel_reason      VARCHAR(16)     NOT NULL DEFAULT '' COMMENT 'timeout or customer' AFTER order_cancelled_at,
  ADD COLUMN queried_at         DATETIME(3)     NULL COMMENT 'last active query of a WAIT_PAY payment' AFTER cancel_reason,
  ADD KEY idx_payments_status_created (status, created_at);

-- refund gives back a payment that landed after its order was closed. One
-- per payment (uk_refund_out_trade_no), its number derived from the payment
-- (uk_refund_no), written in the transaction that records the late
-- payment; the payment-refund job sends it (next_attempt_at is both the
-- claim's lease and the retry backoff), and the platform's verified refund
-- notification settles it. The platform's refund serial is unique too.
CREATE TABLE refund (
  id              BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
  refund_no       VARCHAR(80)     NOT NULL,
  out_trade_no    VARCHAR(64)     NOT NULL,
  order_no        VARCHAR(64)     NOT NULL,
  amount          BIGINT          NOT NULL COMMENT 'cents',
  status          VARCHAR(16)     NOT NULL COMMENT 'PENDING, SUBMITTED, REFUNDED',
  channel         VARCHAR(32)     NOT NULL,
  refund_serial   VARCHAR(64)     NULL COMMENT 'the platform''s refund number',
  attempts        INT             NOT NULL DEFAULT 0,
  next_attempt_at DATETIME(3)     NOT NULL,
  last_error      VARCHAR(255)    NOT NULL DEFAULT '',
  created_at      DATETIME(3)     NOT NULL,
  updated_at      DATETIME(3)     NOT NULL,
  submitted_at    DATETIME(3)     NULL,
  refunded_at     DATETIME(3)     NULL,
  PRIMARY KEY (id),
  UNIQUE KEY uk_refund_no (refund_no),
  UNIQUE KEY uk_refund_out_trade_no (out_trade_no),
  UNIQUE KEY uk_refund_serial (channel, refund_serial),
  KEY idx_refund_due (status, next_attempt_at),
  KEY idx_refund_created (created_at)
) ENGINE=InnoDB;
