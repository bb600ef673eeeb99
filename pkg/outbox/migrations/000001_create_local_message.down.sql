DROP TABLE IF EXISTS local_message;
