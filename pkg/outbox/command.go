package outbox

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"

	"github.com/oncemall/oncemall/pkg/database"
)

// CommandUsage is the synopsis of Command, after the service's name.
const CommandUsage = "outbox stats | outbox redrive [message_no...]"

// Command is every service's `outbox` subcommand, the operator's path when
// the admin endpoint cannot be reached: args are what follows "outbox".
// "stats" prints the backlog, "redrive" puts failed rows (all, or the
// message numbers given) back to pending; each answers one JSON line on
// stdout. It opens the service's database (mysql, dbName) only for valid
// arguments. The running relays pick redriven rows up at their next poll.
func Command(ctx context.Context, mysql database.Config, dbName string, log *slog.Logger, args []string, stdout io.Writer) error {
	if len(args) == 0 || (args[0] != "stats" && args[0] != "redrive") {
		return errors.New("usage: " + CommandUsage)
	}
	db, err := database.Open(ctx, mysql, dbName, log)
	if err != nil {
		return err
	}
	defer database.Close(db)
	enc := json.NewEncoder(stdout)
	if args[0] == "stats" {
		st, err := Stats(ctx, db)
		if err != nil {
			return err
		}
		return enc.Encode(map[string]any{"pending": st.Pending, "failed": st.Failed, "oldest_pending_age_seconds": st.OldestPendingAge.Seconds()})
	}
	n, err := Redrive(ctx, db, args[1:]...)
	if err != nil {
		return err
	}
	return enc.Encode(RedriveResponse{Redriven: n})
}
