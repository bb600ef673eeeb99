-- Recreates the tables 000004 made, empty.
CREATE TABLE biz_idempotent_record (
  id             BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
  idempotent_key VARCHAR(128)    NOT NULL,
  biz_type       TINYINT UNSIGNED NOT NULL COMMENT '1 = coupon used notification',
  biz_no         VARCHAR(64)     NOT NULL COMMENT 'the business document, here the order no',
  created_at     DATETIME(3)     NOT NULL,
  expire_time    DATETIME(3)     NOT NULL,
  PRIMARY KEY (id),
  UNIQUE KEY uk_biz_idempotent_record_key (idempotent_key),
  KEY idx_biz_idempotent_record_expire (expire_time)
) ENGINE=InnoDB;

CREATE TABLE biz_idempotent_record_archive (
  id             BIGINT UNSIGNED NOT NULL,
  idempotent_key VARCHAR(128)    NOT NULL,
  biz_type       TINYINT UNSIGNED NOT NULL,
  biz_no         VARCHAR(64)     NOT NULL,
  created_at     DATETIME(3)     NOT NULL,
  expire_time    DATETIME(3)     NOT NULL,
  archived_at    DATETIME(3)     NOT NULL,
  PRIMARY KEY (id),
  KEY idx_biz_idempotent_record_archive_key (idempotent_key)
) ENGINE=InnoDB;
