ALTER TABLE local_message
  DROP COLUMN defer_count;
