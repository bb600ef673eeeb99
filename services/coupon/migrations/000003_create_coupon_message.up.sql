-- coupon_message is the coupon service's local message table: every
-- order.paid event that names a coupon lands here (PENDING) and the retry job
-- deducts the coupon from it, retrying with backoff until SUCCESS or, past the
-- retry limit or on a business refusal, FAILED with the reason in last_error.
CREATE TABLE coupon_message (
  id              BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
  message_id      VARCHAR(64)     NOT NULL COMMENT 'Nats-Msg-Id of the order.paid event',
  order_no        VARCHAR(64)     NOT NULL,
  user_id         BIGINT UNSIGNED NOT NULL,
  coupon_id       BIGINT UNSIGNED NOT NULL,
  status          VARCHAR(16)     NOT NULL COMMENT 'PENDING, SUCCESS, FAILED',
  retry_count     INT UNSIGNED    NOT NULL DEFAULT 0,
  next_retry_time DATETIME(3)     NOT NULL,
  last_error      VARCHAR(512)    NOT NULL DEFAULT '',
  created_at      DATETIME(3)     NOT NULL,
  updated_at      DATETIME(3)     NOT NULL,
  PRIMARY KEY (id),
  UNIQUE KEY uk_coupon_message_message_id (message_id),
  KEY idx_coupon_message_due (status, next_retry_time),
  KEY idx_coupon_message_order (order_no)
) ENGINE=InnoDB;
