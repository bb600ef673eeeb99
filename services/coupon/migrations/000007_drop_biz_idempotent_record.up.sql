-- The coupon.used notification is gone (nothing consumed it), and with it
-- the idempotent records that kept it to one per order.
DROP TABLE IF EXISTS biz_idempotent_record_archive;
DROP TABLE IF EXISTS biz_idempotent_record;
