ALTER TABLE dead_message DROP KEY idx_dead_message_created_at;
