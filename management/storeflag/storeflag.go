// Package storeflag selects the management store from command-line flags
// and, when a flag is not given, from the environment variables NetBird's
// own deployments set (NB_STORE_ENGINE, NB_STORE_ENGINE_POSTGRES_DSN), so
// existing compose files and unit files keep working.
package storeflag

import (
	"errors"
	"fmt"

	"github.com/spf13/pflag"

	"github.com/wiremesh/wiremesh/internal/flagconf"
	"github.com/wiremesh/wiremesh/internal/secretflag"
	"github.com/wiremesh/wiremesh/management/secretbox"
	"github.com/wiremesh/wiremesh/management/store"
)

// Environment variables read when the matching flag is absent.
const (
	EnvEngine = "NB_STORE_ENGINE"
	EnvDSN    = "NB_STORE_ENGINE_POSTGRES_DSN"
)

// Flags holds the parsed --store and --store-dsn values.
type Flags struct {
	fs      *pflag.FlagSet
	engine  string
	dsn     string
	dsnFile *secretflag.Secret
	// key seals the store's secrets (secretbox); keyLost adopts it for a
	// store sealed with a lost key.
	key     string
	keyFile *secretflag.Secret
	keyLost bool
}

// EnvSecretKey is read when --store-encryption-key is absent.
const EnvSecretKey = "NB_STORE_ENCRYPTION_KEY"

// Bind registers --store and --store-dsn on fs.
func Bind(fs *pflag.FlagSet) *Flags {
	f := &Flags{fs: fs}
	fs.StringVar(&f.engine, "store", "sqlite", "store engine: sqlite (embedded, in --datadir) or postgres (env "+EnvEngine+")")
	fs.StringVar(&f.dsn, "store-dsn", "", "Postgres connection string, e.g. postgres://user:pass@host:5432/db (env "+EnvDSN+"; a password here shows in ps: prefer --store-dsn-file or the env)")
	f.dsnFile = secretflag.File(fs, "store-dsn", "", &f.dsn)
	// NetBird's variable names, besides NB_STORE and NB_STORE_DSN.
	flagconf.EnvAlias(fs, "store", EnvEngine)
	flagconf.EnvAlias(fs, "store-dsn", EnvDSN)
	flagconf.EnvAlias(fs, "store-dsn-file", EnvDSN+"_FILE")
	fs.StringVar(&f.key, "store-encryption-key", "", "key sealing the secrets kept in the store (identity providers' client secrets): 32 bytes as base64 or hex, e.g. from `openssl rand -base64 32`; the same on every instance sharing a Postgres store (env "+EnvSecretKey+"; default: the file "+secretbox.KeyFile+" in --datadir, created on first start)")
	f.keyFile = secretflag.File(fs, "store-encryption-key", EnvSecretKey, &f.key)
	fs.BoolVar(&f.keyLost, "store-encryption-key-lost", false, "the key the store's secrets were sealed with is lost: adopt this one and drop the identity providers' client secrets (admins enter them again)")
	return f
}

// Config resolves the store configuration: flags first, then the
// environment (getenv), then the defaults.
func (f *Flags) Config(dataDir string, getenv func(string) string) (store.Config, error) {
	if err := f.dsnFile.Resolve(); err != nil {
		return store.Config{}, err
	}
	if err := f.keyFile.Resolve(); err != nil {
		return store.Config{}, err
	}
	if f.key != "" {
		if _, err := secretbox.ParseKey(f.key); err != nil {
			return store.Config{}, fmt.Errorf("--store-encryption-key: %w", err)
		}
	}
	engine, dsn := f.engine, f.dsn
	if !f.fs.Changed("store") {
		if v := getenv(EnvEngine); v != "" {
			engine = v
		}
	}
	if !f.dsnFile.Given() {
		if v := getenv(EnvDSN); v != "" {
			dsn = v
		}
	}
	e, err := store.ParseEngine(engine)
	if err != nil {
		return store.Config{}, fmt.Errorf("--store: %w", err)
	}
	c := store.Config{Engine: e, DataDir: dataDir, SecretKey: f.key, ForgetLostSecretKey: f.keyLost}
	switch e {
	case store.Postgres:
		if dsn == "" {
			return c, errors.New("the postgres store needs a connection string: --store-dsn or " + EnvDSN)
		}
		c.DSN = dsn
	case store.SQLite:
		if f.dsnFile.Given() {
			return c, errors.New("--store-dsn is for --store postgres; the sqlite store lives in --datadir")
		}
	}
	return c, nil
}
