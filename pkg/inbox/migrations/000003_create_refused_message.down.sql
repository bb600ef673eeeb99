DROP TABLE IF EXISTS refused_message;
