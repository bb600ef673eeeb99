DROP TABLE IF EXISTS dead_message;
DROP TABLE IF EXISTS processed_message;
