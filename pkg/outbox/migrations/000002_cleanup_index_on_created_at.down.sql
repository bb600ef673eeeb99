ALTER TABLE local_message
  DROP INDEX idx_local_message_created,
  ADD INDEX idx_local_message_sent (status, sent_at);
