package chaos

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"syscall"
	"time"

	"github.com/junban/junban/internal/platform/config"
)

// postgresServer is chaos's own PostgreSQL cluster: initdb into a directory of its own,
// trust authentication, a free port, its socket in the same directory. Stopping it (the
// outage) disturbs nothing else on the machine.
type postgresServer struct {
	bin  string // directory of initdb, pg_ctl
	dir  string // the cluster's directory (data in dir/data)
	port int
	cred *syscall.Credential
	log  string
}

// FindInitdb returns the directory that holds initdb and pg_ctl: PATH first, then the
// newest /usr/lib/postgresql/*/bin (Debian keeps them there, off PATH).
func FindInitdb() (string, error) {
	if p, err := exec.LookPath("initdb"); err == nil {
		if real, err := filepath.EvalSymlinks(p); err == nil {
			p = real // /usr/local/bin/initdb -> /usr/lib/postgresql/15/bin/initdb
		}
		if _, err := os.Stat(filepath.Join(filepath.Dir(p), "pg_ctl")); err == nil {
			return filepath.Dir(p), nil
		}
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(dirs, func(i, j int) bool { return version(dirs[i]) > version(dirs[j]) })
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join(d, "initdb")); err == nil {
			return d, nil
		}
	}
	return "", errors.New("chaos: initdb not found on PATH nor under /usr/lib/postgresql/*/bin (apt-get install postgresql)")
}

func version(binDir string) int {
	v, _ := strconv.Atoi(filepath.Base(filepath.Dir(binDir)))
	return v
}

// postgresCredential is the user PostgreSQL runs as: it refuses to run as root, so
// root runs it as the postgres user; anyone else runs it as themselves.
func postgresCredential() (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		return nil, fmt.Errorf("chaos: running as root needs a postgres user to run PostgreSQL as: %w", err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
}

func startPostgres(ctx context.Context, dir string) (*postgresServer, error) {
	bin, err := FindInitdb()
	if err != nil {
		return nil, err
	}
	cred, err := postgresCredential()
	if err != nil {
		return nil, err
	}
	pgDir := filepath.Join(dir, "postgres")
	if err := os.MkdirAll(pgDir, 0o700); err != nil {
		return nil, err
	}
	if cred != nil {
		// The parents must be traversable by the postgres user, the directory its own.
		for d := pgDir; d != filepath.Dir(dir); d = filepath.Dir(d) {
			if d == pgDir {
				if err := os.Chown(d, int(cred.Uid), int(cred.Gid)); err != nil {
					return nil, err
				}
				continue
			}
			if err := os.Chmod(d, 0o755); err != nil {
				return nil, err
			}
		}
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	pg := &postgresServer{bin: bin, dir: pgDir, port: port, cred: cred, log: filepath.Join(pgDir, "postgres.log")}
	if out, err := pg.run(ctx, "initdb", "-D", pg.data(), "-U", "postgres", "-A", "trust", "-E", "UTF8", "--no-sync"); err != nil {
		return nil, fmt.Errorf("chaos: initdb: %w\n%s", err, out)
	}
	if err := pg.start(ctx); err != nil {
		return nil, err
	}
	admin, err := config.Postgres{URL: pg.url("postgres")}.Open()
	if err != nil {
		pg.remove()
		return nil, err
	}
	defer func() {
		if sqlDB, err := admin.DB(); err == nil {
			sqlDB.Close()
		}
	}()
	if err := admin.WithContext(ctx).Exec("CREATE DATABASE junban").Error; err != nil {
		pg.remove()
		return nil, fmt.Errorf("chaos: create database: %w", err)
	}
	return pg, nil
}

func (pg *postgresServer) data() string { return filepath.Join(pg.dir, "data") }

// url is the connection string of database db.
func (pg *postgresServer) url(db string) string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/%s?sslmode=disable", pg.port, db)
}

func (pg *postgresServer) run(ctx context.Context, name string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, filepath.Join(pg.bin, name), args...)
	cmd.Dir = pg.dir
	cmd.Env = append(os.Environ(), "LC_ALL=C", "PGTZ=UTC")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Credential: pg.cred}
	return cmd.CombinedOutput()
}

// start starts the server and waits until it accepts connections.
func (pg *postgresServer) start(ctx context.Context) error {
	opts := fmt.Sprintf("-p %d -k %s -c listen_addresses=127.0.0.1 -c max_connections=100", pg.port, pg.dir)
	out, err := pg.run(ctx, "pg_ctl", "-D", pg.data(), "-l", pg.log, "-o", opts, "-w", "-t", "60", "start")
	if err != nil {
		return fmt.Errorf("chaos: pg_ctl start: %w\n%s\n%s", err, out, tail(pg.log, 2000))
	}
	return nil
}

// stop shuts the server down in fast mode: connections are cut, transactions in
// flight roll back.
func (pg *postgresServer) stop(ctx context.Context) error {
	out, err := pg.run(ctx, "pg_ctl", "-D", pg.data(), "-m", "fast", "-w", "-t", "60", "stop")
	if err != nil {
		return fmt.Errorf("chaos: pg_ctl stop: %w\n%s", err, out)
	}
	return nil
}

// remove stops the server (immediately) and deletes its directory.
func (pg *postgresServer) remove() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := os.Stat(filepath.Join(pg.data(), "postmaster.pid")); err == nil {
		pg.run(ctx, "pg_ctl", "-D", pg.data(), "-m", "immediate", "-w", "stop")
	}
	os.RemoveAll(pg.dir)
}
