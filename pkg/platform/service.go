package platform

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"text/tabwriter"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/oncemall/oncemall/pkg/config"
	"github.com/oncemall/oncemall/pkg/httpserver"
	"github.com/oncemall/oncemall/pkg/inbox"
	"github.com/oncemall/oncemall/pkg/logging"
	"github.com/oncemall/oncemall/pkg/migrate"
	"github.com/oncemall/oncemall/pkg/natsjs"
	"github.com/oncemall/oncemall/pkg/outbox"
)

// Settings is a service's configuration as the platform reads it: a struct
// that embeds Config (which provides Shared) and whose Validate checks
// everything, Config.Validate included.
type Settings interface {
	Shared() Config
	Validate() error
}

// Service declares a service. Run reads its configuration into a C from the
// environment, starts the plumbing, calls Wire, and runs what Wire declared.
type Service[C Settings] struct {
	// Name is the service's name: its logs, its NATS client, its Redis lock
	// prefix, and its database oncemall_<Name> unless MYSQL_DATABASE says
	// otherwise.
	Name string
	// Port is the default of HTTP_ADDR (":<Port>").
	Port int
	// Migrations are the service's own schema. The outbox's and the
	// inbox's are applied too: every service has both.
	Migrations []migrate.Source
	// Streams are the roots of the subjects the service publishes, whose
	// streams it declares ("order" declares ORDER, carrying order.>). The
	// streams it consumes from are their publishers': its consumers wait for
	// them, so the services start in any order and no service needs the
	// right to change another's stream.
	Streams []string
	// PriorityRoutes are route prefixes, beside /internal/ (InternalRoutes),
	// whose requests finish work already admitted rather than start new
	// work, such as the payment platform's callbacks: under overload they
	// are admitted ahead of new requests from clients
	// (HTTP_PRIORITY_RESERVE).
	PriorityRoutes []string
	// Wire builds the use cases over w's connections and declares the
	// service's routes, consumers and jobs on w.
	Wire func(w *Wiring, cfg C) error
}

// Main runs s as the process's main: the command line, SIGINT and SIGTERM
// for a graceful shutdown, exit status 1 with the error on stderr.
func Main[C Settings](s Service[C]) {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	err := Run(ctx, s, os.Args[1:], os.Stdout)
	stop()
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", s.Name, err)
		os.Exit(1)
	}
}

// Run runs s with the command line args (without the program name), logging
// to stdout: what Main does, callable from a test. With no argument it
// serves until ctx ends.
func Run[C Settings](ctx context.Context, s Service[C], args []string, stdout io.Writer) error {
	command := ""
	if len(args) > 0 {
		command = args[0]
	}
	switch command {
	case "help", "-h", "-help", "--help":
		return s.Help(stdout)
	case "healthcheck":
		// Before the configuration: the probe of a container healthcheck
		// needs none, and must not fail on it.
		return httpserver.Healthcheck(ctx, args[1:])
	case "", "migrate", "outbox":
	default:
		return fmt.Errorf("unknown command %q (try %s --help)", command, s.Name)
	}
	cfg, err := s.Load(os.LookupEnv)
	if err != nil {
		return err
	}
	shared := cfg.Shared()
	log, err := logging.New(stdout, s.Name, shared.Log)
	if err != nil {
		return err
	}
	opts := s.options(shared, log)
	switch command {
	case "migrate":
		return MigrateOnly(ctx, shared, opts)
	case "outbox":
		return outbox.Command(ctx, shared.MySQL, shared.Database, log, args[1:], stdout)
	}
	w, err := build(ctx, s, shared, opts)
	if err != nil {
		return err
	}
	if err := s.Wire(w, cfg); err != nil {
		return errors.Join(err, w.rt.Shutdown(context.WithoutCancel(ctx)))
	}
	return w.Serve(ctx)
}

// Build starts s's runtime with cfg, logging to log: its connections open,
// its migrations applied, its streams declared. It returns the Wiring that
// Wire builds on, with nothing declared yet. Run is Load, Build, Wire and
// Serve; a test that assembles the service itself, with substitutions,
// calls Build, then the service's assembly on the Wiring, then Serve, so
// that it runs exactly what production runs.
func Build[C Settings](ctx context.Context, s Service[C], cfg C, log *slog.Logger) (*Wiring, error) {
	shared := cfg.Shared()
	return build(ctx, s, shared, s.options(shared, log))
}

func build[C Settings](ctx context.Context, s Service[C], shared Config, opts Options) (*Wiring, error) {
	rt, err := Start(ctx, shared, opts)
	if err != nil {
		return nil, err
	}
	w, err := newWiring(s.Name, rt, shared)
	if err != nil {
		return nil, errors.Join(err, rt.Shutdown(context.WithoutCancel(ctx)))
	}
	return w, nil
}

// Load reads s's configuration from lookup (the environment), with s's
// defaults for HTTP_ADDR and MYSQL_DATABASE, and validates it: every
// malformed or unusable variable is named, and a lab variant outside
// ONCEMALL_ENV=lab is refused.
func (s Service[C]) Load(lookup config.LookupFunc) (C, error) {
	var cfg C
	defaults := s.defaults()
	err := config.LoadFrom(&cfg, func(name string) (string, bool) {
		if v, ok := lookup(name); ok {
			return v, true
		}
		v, ok := defaults[name]
		return v, ok
	})
	if err != nil {
		return cfg, err
	}
	return cfg, errors.Join(cfg.Validate(), checkModes(cfg, cfg.Shared().Env))
}

// Vars lists every variable s reads, with s's own defaults: what --help
// prints and what the drift tests compare with compose and the docs.
func (s Service[C]) Vars() []config.Var {
	var cfg C
	vars := config.Vars(&cfg)
	defaults := s.defaults()
	for i, v := range vars {
		if d, ok := defaults[v.Name]; ok {
			vars[i].Default = d
		}
	}
	return vars
}

func (s Service[C]) defaults() map[string]string {
	return map[string]string{"HTTP_ADDR": ":" + strconv.Itoa(s.Port), "MYSQL_DATABASE": "oncemall_" + s.Name}
}

// Help prints the commands and every variable with its default and meaning.
func (s Service[C]) Help(w io.Writer) error {
	fmt.Fprintf(w, "Usage: %s [command]\n\nCommands:\n", s.Name)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, c := range [][2]string{
		{"(none)", "serve HTTP, consume events and run the jobs until SIGTERM or SIGINT"},
		{"migrate", "apply the database migrations and exit"},
		{"outbox stats", "print the outbox backlog as JSON"},
		{"outbox redrive [id...]", "put failed outbox messages (all, or the ids) back to pending"},
		{"healthcheck URL", "GET URL (its own /readyz) and exit 0 on a 2xx answer: a container healthcheck needing no shell"},
		{"help", "print this help"},
	} {
		fmt.Fprintf(tw, "  %s\t%s\n", c[0], c[1])
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprint(w, "\nEnvironment (variable, default, meaning):\n")
	for _, v := range s.Vars() {
		fmt.Fprintf(tw, "  %s\t%s\t%s\n", v.Name, v.Default, v.Usage)
	}
	return tw.Flush()
}

// options is what Start needs: the migrations (the service's, then the
// outbox's and the inbox's) and the streams under the event prefix.
func (s Service[C]) options(cfg Config, log *slog.Logger) Options {
	streams := make([]jetstream.StreamConfig, 0, len(s.Streams))
	for _, root := range s.Streams {
		streams = append(streams, natsjs.EventStream(cfg.Events, root))
	}
	return Options{
		Service:        s.Name,
		Migrations:     append(append([]migrate.Source(nil), s.Migrations...), outbox.Migrations, inbox.Migrations),
		Streams:        streams,
		Logger:         log,
		PriorityRoutes: s.PriorityRoutes,
	}
}
