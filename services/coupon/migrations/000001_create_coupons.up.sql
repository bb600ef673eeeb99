CREATE TABLE coupons (
  id          BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
  template_id BIGINT UNSIGNED NOT NULL,
  user_id     BIGINT UNSIGNED NOT NULL,
  status      VARCHAR(16)     NOT NULL COMMENT 'UNUSED, USED',
  used_order_no VARCHAR(64)   NULL,
  version     INT UNSIGNED    NOT NULL DEFAULT 0,
  created_at  DATETIME(3)     NOT NULL,
  updated_at  DATETIME(3)     NOT NULL,
  PRIMARY KEY (id),
  KEY idx_coupons_user (user_id, status)
) ENGINE=InnoDB;
