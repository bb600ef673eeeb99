CREATE TABLE local_message (
  id              BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
  message_no      VARCHAR(64)     NOT NULL COMMENT 'event id: Nats-Msg-Id and the consumers dedup key',
  topic           VARCHAR(255)    NOT NULL COMMENT 'JetStream subject',
  body            MEDIUMBLOB      NOT NULL,
  headers         TEXT            NULL COMMENT 'JSON object of extra NATS headers',
  status          VARCHAR(8)      NOT NULL COMMENT 'pending, sent, failed',
  retry_count     INT UNSIGNED    NOT NULL DEFAULT 0,
  next_retry_time DATETIME(3)     NOT NULL,
  last_error      VARCHAR(512)    NULL,
  created_at      DATETIME(3)     NOT NULL,
  updated_at      DATETIME(3)     NOT NULL,
  sent_at         DATETIME(3)     NULL,
  PRIMARY KEY (id),
  UNIQUE KEY uk_local_message_no (message_no),
  KEY idx_local_message_poll (status, next_retry_time),
  KEY idx_local_message_sent (status, sent_at)
) ENGINE=InnoDB;
