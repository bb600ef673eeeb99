CREATE TABLE processed_message (
  id           BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
  consumer     VARCHAR(128)    NOT NULL COMMENT 'durable consumer name, the dedup scope',
  message_id   VARCHAR(128)    NOT NULL COMMENT 'Nats-Msg-Id, the outbox message_no',
  processed_at DATETIME(3)     NOT NULL,
  PRIMARY KEY (id),
  UNIQUE KEY uk_processed_message (consumer, message_id),
  KEY idx_processed_message_at (processed_at)
) ENGINE=InnoDB;

CREATE TABLE dead_message (
  id          BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
  consumer    VARCHAR(128)    NOT NULL,
  message_id  VARCHAR(128)    NOT NULL,
  subject     VARCHAR(255)    NOT NULL,
  body        MEDIUMBLOB      NOT NULL,
  headers     TEXT            NULL,
  reason      VARCHAR(1024)   NOT NULL,
  deliveries  INT UNSIGNED    NOT NULL,
  created_at  DATETIME(3)     NOT NULL,
  PRIMARY KEY (id),
  UNIQUE KEY uk_dead_message (consumer, message_id)
) ENGINE=InnoDB;
