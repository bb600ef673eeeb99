-- idempotency_record is the truth layer of the Idempotency-Key middleware: one
-- row per (scope, key). The unique key is the claim: of concurrent requests
-- with one key, exactly one INSERT succeeds. Keys are compared byte for byte
-- (ascii_bin), as the header is case-sensitive.
CREATE TABLE idempotency_record (
  id               BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
  scope            VARCHAR(400) CHARACTER SET ascii COLLATE ascii_bin NOT NULL COMMENT 'caller, method and route',
  idem_key         VARCHAR(255) CHARACTER SET ascii COLLATE ascii_bin NOT NULL COMMENT 'the Idempotency-Key header',
  fingerprint      CHAR(64) CHARACTER SET ascii COLLATE ascii_bin NOT NULL COMMENT 'SHA-256 of method, route and canonical body',
  status           VARCHAR(16) NOT NULL COMMENT 'PROCESSING, SUCCEEDED or FAILED',
  owner            CHAR(32) CHARACTER SET ascii COLLATE ascii_bin NOT NULL COMMENT 'token of the request that holds the claim',
  response_status  SMALLINT NULL,
  response_headers TEXT NULL COMMENT 'replayed headers, JSON',
  response_body    MEDIUMBLOB NULL,
  locked_until     DATETIME(3) NOT NULL COMMENT 'a PROCESSING row may be taken over after this',
  expire_time      DATETIME(3) NOT NULL COMMENT 'the archiver deletes the row after this',
  created_at       DATETIME(3) NOT NULL,
  updated_at       DATETIME(3) NOT NULL,
  PRIMARY KEY (id),
  UNIQUE KEY uk_idempotency_scope_key (scope, idem_key),
  KEY idx_idempotency_expire_time (expire_time)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;
