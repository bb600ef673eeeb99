DROP TABLE IF EXISTS coupon_lock_hold;
