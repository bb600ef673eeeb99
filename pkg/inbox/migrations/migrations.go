// Package migrations embeds the inbox schema: processed_message,
// refused_message and dead_message.
package migrations

import "embed"

// Files holds the NNNNNN_name.up/down.sql files.
//
//go:embed *.sql
var Files embed.FS
