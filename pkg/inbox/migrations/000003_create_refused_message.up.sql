-- refused_message counts each message's refusals by its handler, which is
-- what INBOX_MAX_DELIVER limits: the server's delivery count also counts the
-- deliveries an unreachable MySQL or a restart ended. Written only when a
-- handler fails; the cleanup job deletes rows past INBOX_RETENTION.
CREATE TABLE refused_message (
  id          BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
  consumer    VARCHAR(128)    NOT NULL,
  message_id  VARCHAR(128)    NOT NULL,
  refusals    INT UNSIGNED    NOT NULL,
  reason      VARCHAR(1024)   NOT NULL COMMENT 'the last refusal',
  refused_at  DATETIME(3)     NOT NULL COMMENT 'the last refusal',
  PRIMARY KEY (id),
  UNIQUE KEY uk_refused_message (consumer, message_id),
  KEY idx_refused_message_at (refused_at)
) ENGINE=InnoDB;
