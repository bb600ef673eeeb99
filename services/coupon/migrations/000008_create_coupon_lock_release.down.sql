DROP TABLE IF EXISTS coupon_lock_release;
