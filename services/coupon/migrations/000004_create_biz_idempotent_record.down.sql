DROP TABLE IF EXISTS biz_idempotent_record_archive;
DROP TABLE IF EXISTS biz_idempotent_record;
