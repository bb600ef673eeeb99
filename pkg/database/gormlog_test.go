package database_test

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"

	"gorm.io/gorm"
	"gorm.io/gorm/logger"

	"github.com/oncemall/oncemall/pkg/database"
	"github.com/oncemall/oncemall/pkg/testkit/testenv"
)

// The logger Open installs must still log failing statements (with their
// SQL) and must not render the ones it does not log.
func TestOpenLogsFailedStatementsOnly(t *testing.T) {
	cfg, name := testenv.NewDatabase(t)
	var buf bytes.Buffer
	db, err := database.Open(t.Context(), cfg, name, slog.New(slog.NewTextHandler(&buf, nil)))
	testenv.Must(t, err)
	t.Cleanup(func() { _ = database.Close(db) })

	testenv.Must(t, db.Exec("SELECT 1").Error)
	if buf.Len() != 0 {
		t.Fatalf("a fast successful statement was logged: %s", buf.String())
	}
	if err := db.Exec("SELECT * FROM no_such_table_here WHERE id = ?", 42).Error; err == nil {
		t.Fatal("query on a missing table succeeded")
	}
	if out := buf.String(); !strings.Contains(out, "no_such_table_here WHERE id = 42") {
		t.Fatalf("the failing statement was not logged with its SQL: %q", out)
	}
	buf.Reset()
	// A silenced session (the stores' quiet()) logs nothing, errors included.
	quiet := db.Session(&gorm.Session{Logger: db.Logger.LogMode(logger.Silent)})
	_ = quiet.Exec("SELECT * FROM no_such_table_here").Error
	if buf.Len() != 0 {
		t.Fatalf("a silenced session logged: %s", buf.String())
	}
}
