DROP TABLE IF EXISTS coupons;
DROP TABLE IF EXISTS coupon_template;
