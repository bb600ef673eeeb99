// Command natsrun runs a command against a NATS server of its own: the
// nats-server version scripts/go.mod pins, the one docker-compose.yml runs,
// in process, on a free 127.0.0.1 port with its JetStream store in a
// temporary directory, and NATS_URL set for the command. It stops the
// server when the command ends and exits with the command's status.
//
// Usage:
//
//	natsrun [-jetstream-from deploy/nats.conf] -- command [args...]
//
// With -jetstream-from the JetStream settings of that configuration file
// apply (deploy/nats.conf: sync_interval always, an fsync before every
// PubAck); its users do not, so the command gets a server without
// authentication, as the tests and benchmarks expect of NATS_URL. Without
// it the server has JetStream's defaults. make bench runs the outbox
// benchmarks both ways (scripts/bench).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"regexp"
	"syscall"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	code, err := run(ctx, os.Args[1:], os.Stderr)
	if err != nil {
		fmt.Fprintln(os.Stderr, "natsrun:", err)
		if code == 0 {
			code = 1
		}
	}
	os.Exit(code)
}

// run starts the server, runs the command and returns its exit status.
func run(ctx context.Context, args []string, log io.Writer) (int, error) {
	fs := flag.NewFlagSet("natsrun", flag.ContinueOnError)
	from := fs.String("jetstream-from", "", "a nats-server configuration file whose JetStream settings apply (deploy/nats.conf)")
	if err := fs.Parse(args); err != nil {
		return 2, err
	}
	command := fs.Args()
	if len(command) == 0 {
		return 2, errors.New("usage: natsrun [-jetstream-from FILE] -- command [args...]")
	}
	store, err := os.MkdirTemp("", "natsrun-")
	if err != nil {
		return 0, err
	}
	defer os.RemoveAll(store)
	opts, err := options(*from, store)
	if err != nil {
		return 0, err
	}
	s, err := server.NewServer(opts)
	if err != nil {
		return 0, err
	}
	go s.Start()
	defer s.Shutdown()
	if !s.ReadyForConnections(10 * time.Second) {
		return 0, errors.New("nats-server did not start in 10s")
	}
	sync := "JetStream defaults"
	if *from != "" {
		sync = "JetStream settings of " + *from
	}
	fmt.Fprintf(log, "natsrun: nats-server %s at %s, %s (sync always: %t)\n", server.VERSION, s.ClientURL(), sync, opts.SyncAlways)

	cmd := exec.CommandContext(ctx, command[0], command[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.Env = append(os.Environ(), "NATS_URL="+s.ClientURL())
	err = cmd.Run()
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		return exit.ExitCode(), nil
	}
	return 0, err
}

// variable is a $NAME reference of a configuration file.
var variable = regexp.MustCompile(`\$([A-Z][A-Z0-9_]*)`)

// options is a server on a free 127.0.0.1 port with JetStream in store,
// taking the JetStream settings (sync, limits) of the file from, if any.
func options(from, store string) (*server.Options, error) {
	opts := &server.Options{Host: "127.0.0.1", Port: server.RANDOM_PORT, JetStream: true, StoreDir: store, NoSigs: true}
	if from == "" {
		return opts, nil
	}
	text, err := os.ReadFile(from)
	if err != nil {
		return nil, err
	}
	// The file's passwords are read from the environment, and its users
	// are not used here: a reference the environment lacks gets a value of
	// this process's own, so that the file parses.
	for _, m := range variable.FindAllSubmatch(text, -1) {
		if _, ok := os.LookupEnv(string(m[1])); !ok {
			_ = os.Setenv(string(m[1]), "natsrun-unused")
		}
	}
	file, err := server.ProcessConfigFile(from)
	if err != nil {
		return nil, err
	}
	if !file.JetStream {
		return nil, fmt.Errorf("%s does not enable JetStream", from)
	}
	opts.SyncAlways, opts.SyncInterval = file.SyncAlways, file.SyncInterval
	opts.JetStreamMaxMemory, opts.JetStreamMaxStore = file.JetStreamMaxMemory, file.JetStreamMaxStore
	return opts, nil
}
