-- users are the people who sign in: customers and operators. id is the
-- user id every other service keys orders, coupons and payments by (a
-- token's sub). password_hash is bcrypt's, salt and cost included. roles is
-- the comma-separated list a token carries ("customer", "operator").
CREATE TABLE users (
  id            BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
  username      VARCHAR(64)     NOT NULL,
  password_hash VARBINARY(72)   NOT NULL,
  roles         VARCHAR(255)    NOT NULL DEFAULT '',
  created_at    DATETIME(3)     NOT NULL,
  PRIMARY KEY (id),
  UNIQUE KEY uq_users_username (username)
) ENGINE=InnoDB;
