// Package migrations embeds the outbox's schema: the local_message table.
package migrations

import "embed"

// Files holds the NNNNNN_name.up/down.sql files.
//
//go:embed *.sql
var Files embed.FS
