-- coupon_template is what marketing defines; coupons are issued from it.
CREATE TABLE coupon_template (
  id               BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
  name             VARCHAR(128)    NOT NULL,
  discount_amount  BIGINT          NOT NULL COMMENT 'cents taken off the order',
  min_order_amount BIGINT          NOT NULL DEFAULT 0 COMMENT 'cents the order must reach',
  created_at       DATETIME(3)     NOT NULL,
  PRIMARY KEY (id)
) ENGINE=InnoDB;

-- coupons are issued to one user each. status follows the state machine
-- UNUSED -> USED; used_order_no names the order that used it, which is how a
-- retry tells "already used by this order" from "used by another order".
CREATE TABLE coupons (
  id            BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
  template_id   BIGINT UNSIGNED NOT NULL,
  user_id       BIGINT UNSIGNED NOT NULL,
  status        VARCHAR(16)     NOT NULL COMMENT 'UNUSED, USED',
  used_order_no VARCHAR(64)     NULL,
  version       INT UNSIGNED    NOT NULL DEFAULT 0,
  created_at    DATETIME(3)     NOT NULL,
  updated_at    DATETIME(3)     NOT NULL,
  PRIMARY KEY (id),
  KEY idx_coupons_user (user_id, status),
  KEY idx_coupons_template (template_id)
) ENGINE=InnoDB;
