DROP TABLE IF EXISTS coupon_deduction;
