-- The cleanup job deletes dead letters by age (INBOX_DEAD_RETENTION); without
-- this index every run would scan the table.
ALTER TABLE dead_message ADD KEY idx_dead_message_created_at (created_at);
