DROP TABLE IF EXISTS coupon_message;
