package flagconf

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// testFlags registers one flag of each kind a server has.
func testFlags() *pflag.FlagSet {
	fs := pflag.NewFlagSet("t", pflag.ContinueOnError)
	fs.String(ConfigFlag, "", "")
	fs.String("listen", ":33073", "")
	fs.Int("stun-port", 3478, "")
	fs.Bool("disable-relay", false, "")
	fs.Duration("turn-ttl", time.Hour, "")
	fs.StringSlice("dashboard-origin", nil, "")
	fs.StringArray("turn-denied-peer-ip", nil, "")
	fs.String("relay-secret", "", "")
	fs.String("relay-secret-file", "", "")
	EnvAlias(fs, "relay-secret", "NB_RELAY_AUTH_SECRET")
	EnvAlias(fs, "relay-secret-file", "NB_RELAY_AUTH_SECRET_FILE")
	fs.String("api-key", "", "")            // a secret by its name
	fs.Bool("oidc-use-id-token", false, "") // not one: a bool
	fs.Int("pin", 0, "")
	MarkSecret(fs, "pin")
	fs.String("acme-http-listen", ":80", "")
	AllowEmpty(fs, "acme-http-listen")
	return fs
}

func envOf(m map[string]string) LookupEnv {
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

// writeConfig writes a config file with the given mode and returns its path.
func writeConfig(t *testing.T, body string, mode os.FileMode) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, mode); err != nil {
		t.Fatal(err)
	}
	return p
}

// run parses args, applies env and file, and returns every flag's value.
func run(t *testing.T, args []string, env map[string]string, file string) (map[string]string, *pflag.FlagSet, error) {
	t.Helper()
	fs := testFlags()
	if file != "" {
		p := writeConfig(t, file, 0o600)
		if env == nil {
			env = map[string]string{}
		}
		if _, ok := env["NB_CONFIG"]; !ok {
			args = append(args, "--config", p)
		}
	}
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	err := applier{fs: fs, lookup: envOf(env), euid: os.Geteuid()}.apply()
	got := map[string]string{}
	fs.VisitAll(func(f *pflag.Flag) {
		if f.Name != ConfigFlag {
			got[f.Name] = f.Value.String()
		}
	})
	return got, fs, err
}

// TestPrecedence: for every kind of flag, the command line beats the
// environment, which beats the file, which beats the default.
func TestPrecedence(t *testing.T) {
	kinds := []struct {
		flag, env             string
		cli, envVal, fileVal  string
		wantCLI, want, wantFl string // value after cli / env / file
		def                   string
	}{
		{flag: "listen", env: "NB_LISTEN", cli: "1.1.1.1:1", envVal: "2.2.2.2:2", fileVal: "3.3.3.3:3",
			wantCLI: "1.1.1.1:1", want: "2.2.2.2:2", wantFl: "3.3.3.3:3", def: ":33073"},
		{flag: "stun-port", env: "NB_STUN_PORT", cli: "1", envVal: "2", fileVal: "3",
			wantCLI: "1", want: "2", wantFl: "3", def: "3478"},
		{flag: "disable-relay", env: "NB_DISABLE_RELAY", cli: "true", envVal: "true", fileVal: "true",
			wantCLI: "true", want: "true", wantFl: "true", def: "false"},
		{flag: "turn-ttl", env: "NB_TURN_TTL", cli: "1m", envVal: "2m", fileVal: "3m",
			wantCLI: "1m0s", want: "2m0s", wantFl: "3m0s", def: "1h0m0s"},
		{flag: "dashboard-origin", env: "NB_DASHBOARD_ORIGIN", cli: "https://a", envVal: "https://b, https://c", fileVal: "[https://d, https://e]",
			wantCLI: "[https://a]", want: "[https://b,https://c]", wantFl: "[https://d,https://e]", def: "[]"},
		{flag: "turn-denied-peer-ip", env: "NB_TURN_DENIED_PEER_IP", cli: "10.0.0.0/8", envVal: "10.1.0.0/16,10.2.0.0/16", fileVal: "[10.3.0.0/16]",
			wantCLI: "[10.0.0.0/8]", want: "[10.1.0.0/16,10.2.0.0/16]", wantFl: "[10.3.0.0/16]", def: "[]"},
	}
	for _, k := range kinds {
		t.Run(k.flag, func(t *testing.T) {
			file := k.flag + ": " + k.fileVal + "\n"
			env := map[string]string{k.env: k.envVal}
			cases := []struct {
				name string
				args []string
				env  map[string]string
				file string
				want string
			}{
				{"flag over env and file", []string{"--" + k.flag + "=" + k.cli}, env, file, k.wantCLI},
				{"env over file", nil, env, file, k.want},
				{"file", nil, nil, file, k.wantFl},
				{"default", nil, nil, "", k.def},
			}
			for _, c := range cases {
				got, fs, err := run(t, c.args, c.env, c.file)
				if err != nil {
					t.Fatalf("%s: %v", c.name, err)
				}
				if got[k.flag] != c.want {
					t.Errorf("%s: --%s = %q, want %q", c.name, k.flag, got[k.flag], c.want)
				}
				// A configured value counts as given, as code asking
				// pflag whether the user set a flag expects.
				if changed := fs.Changed(k.flag); changed != (c.want != k.def || c.name != "default") {
					t.Errorf("%s: Changed = %v", c.name, changed)
				}
			}
		})
	}
}

// TestSecretPairs: a secret and its -file twin are one setting; older
// variable names still work; one layer giving both is refused.
func TestSecretPairs(t *testing.T) {
	cases := []struct {
		name    string
		args    []string
		env     map[string]string
		file    string
		want    map[string]string // relay-secret, relay-secret-file
		wantErr string
	}{
		{name: "file key", file: "relay-secret-file: /run/s\n", want: map[string]string{"relay-secret": "", "relay-secret-file": "/run/s"}},
		{name: "env beats the file's twin", env: map[string]string{"NB_RELAY_SECRET": "e"}, file: "relay-secret-file: /run/s\n",
			want: map[string]string{"relay-secret": "e", "relay-secret-file": ""}},
		{name: "env file beats the file's secret", env: map[string]string{"NB_RELAY_SECRET_FILE": "/run/e"}, file: "relay-secret: f\n",
			want: map[string]string{"relay-secret": "", "relay-secret-file": "/run/e"}},
		{name: "old name", env: map[string]string{"NB_RELAY_AUTH_SECRET": "old"}, want: map[string]string{"relay-secret": "old", "relay-secret-file": ""}},
		{name: "old file name", env: map[string]string{"NB_RELAY_AUTH_SECRET_FILE": "/run/old"}, want: map[string]string{"relay-secret": "", "relay-secret-file": "/run/old"}},
		{name: "old and new agree", env: map[string]string{"NB_RELAY_AUTH_SECRET": "x", "NB_RELAY_SECRET": "x"}, want: map[string]string{"relay-secret": "x", "relay-secret-file": ""}},
		{name: "command line twin beats env", args: []string{"--relay-secret-file", "/run/c"}, env: map[string]string{"NB_RELAY_SECRET": "e"},
			want: map[string]string{"relay-secret": "", "relay-secret-file": "/run/c"}},
		{name: "old and new differ", env: map[string]string{"NB_RELAY_AUTH_SECRET": "s3cr3t-one", "NB_RELAY_SECRET": "s3cr3t-two"}, wantErr: "NB_RELAY_SECRET and NB_RELAY_AUTH_SECRET both set to different values"},
		{name: "both in env", env: map[string]string{"NB_RELAY_SECRET": "s3cr3t-one", "NB_RELAY_SECRET_FILE": "/run/x"}, wantErr: "NB_RELAY_SECRET and NB_RELAY_SECRET_FILE both set"},
		{name: "both in file", file: "relay-secret: x\nrelay-secret-file: /run/x\n", wantErr: "keys relay-secret and relay-secret-file both given"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, _, err := run(t, c.args, c.env, c.file)
			if c.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), c.wantErr) {
					t.Fatalf("error %v, want %q", err, c.wantErr)
				}
				for _, v := range c.env {
					if strings.Contains(err.Error(), v) {
						t.Fatalf("error %q shows a secret", err)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			sub := map[string]string{"relay-secret": got["relay-secret"], "relay-secret-file": got["relay-secret-file"]}
			if d := cmp.Diff(c.want, sub); d != "" {
				t.Fatalf("(-want +got)\n%s", d)
			}
		})
	}
}

// TestRefusals: what does not parse or is not a setting stops the start
// with the name of the variable or key, and nothing is assigned.
func TestRefusals(t *testing.T) {
	cases := []struct {
		name    string
		env     map[string]string
		file    string
		wantErr []string
		hidden  string // must not appear in the error
	}{
		{name: "env int", env: map[string]string{"NB_STUN_PORT": "many", "NB_LISTEN": "1.2.3.4:5"}, wantErr: []string{"NB_STUN_PORT", "--stun-port"}},
		{name: "env bool", env: map[string]string{"NB_DISABLE_RELAY": "yes please"}, wantErr: []string{"NB_DISABLE_RELAY"}},
		{name: "env duration", env: map[string]string{"NB_TURN_TTL": "10"}, wantErr: []string{"NB_TURN_TTL", "--turn-ttl"}},
		{name: "file int", file: "listen: 1.2.3.4:5\nstun-port: many\n", wantErr: []string{"line 2", "stun-port"}},
		{name: "file bool", file: "disable-relay: yes\n", wantErr: []string{"line 1", "disable-relay"}},
		{name: "secret value not shown", env: map[string]string{"NB_PIN": "hunter2-secret"}, wantErr: []string{"NB_PIN", "--pin"}, hidden: "hunter2"},
		{name: "unknown key", file: "listen: x\nlsiten: y\n", wantErr: []string{"line 2", `unknown key "lsiten"`}},
		{name: "underscore key", file: "stun_port: 1\n", wantErr: []string{`"stun_port"`, `did you mean "stun-port"`}},
		{name: "help is no key", file: "help: true\n", wantErr: []string{`unknown key "help"`}},
		{name: "config is no key", file: "config: /etc/other.yaml\n", wantErr: []string{`unknown key "config"`}},
		{name: "duplicate", file: "listen: a\nlisten: b\n", wantErr: []string{`key "listen" given twice`, "line 2"}},
		{name: "nested", file: "listen:\n  host: a\n", wantErr: []string{`"listen": nested maps`}},
		{name: "no value", file: "listen:\n", wantErr: []string{`key "listen" has no value`}},
		{name: "list for one value", file: "listen: [a, b]\n", wantErr: []string{"--listen takes one value, not a list"}},
		{name: "nested list", file: "dashboard-origin: [[a]]\n", wantErr: []string{"list items must be plain values"}},
		{name: "alias", file: "listen: &a x\nrelay-secret-file: *a\n", wantErr: []string{"aliases are not supported"}},
		{name: "two documents", file: "listen: a\n---\nlisten: b\n", wantErr: []string{"more than one YAML document"}},
		{name: "not a map", file: "- listen\n", wantErr: []string{"must be a map"}},
		{name: "bad yaml", file: "listen: [a\n", wantErr: []string{"not a flat YAML map"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, _, err := run(t, nil, c.env, c.file)
			if err == nil {
				t.Fatalf("accepted: %v", got)
			}
			for _, w := range c.wantErr {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not name %q", err, w)
				}
			}
			if c.hidden != "" && strings.Contains(err.Error(), c.hidden) {
				t.Errorf("error %q shows the secret", err)
			}
			// Nothing assigned: every flag keeps its default.
			if got["listen"] != ":33073" || got["stun-port"] != "3478" {
				t.Errorf("assigned despite the error: listen %q stun-port %q", got["listen"], got["stun-port"])
			}
		})
	}
}

// TestEmptyAndOptional: empty files and empty variables set nothing.
func TestEmptyAndOptional(t *testing.T) {
	for _, file := range []string{"", "# only a comment\n", "---\n", "{}\n"} {
		fs := testFlags()
		p := writeConfig(t, file, 0o644)
		if err := (applier{fs: fs, lookup: envOf(map[string]string{"NB_CONFIG": p, "NB_LISTEN": ""}), euid: os.Geteuid()}).apply(); err != nil {
			t.Fatalf("%q: %v", file, err)
		}
		if fs.Changed("listen") {
			t.Fatalf("%q: listen set", file)
		}
	}
	fs := testFlags()
	if err := Apply(fs, envOf(nil)); err != nil || fs.Changed("listen") {
		t.Fatalf("no config, no env: %v", err)
	}
	// Where "" means something, an empty variable is that value.
	got, _, err := run(t, nil, map[string]string{"NB_ACME_HTTP_LISTEN": "", "NB_LISTEN": ""}, "")
	if err != nil || got["acme-http-listen"] != "" || got["listen"] != ":33073" {
		t.Fatalf("empty variables: %v %v", got, err)
	}
}

// TestConfigFromEnv: NB_CONFIG names the file when --config is absent,
// and --config wins over it.
func TestConfigFromEnv(t *testing.T) {
	a := writeConfig(t, "listen: from-a\n", 0o600)
	b := writeConfig(t, "listen: from-b\n", 0o600)
	for _, c := range []struct {
		args []string
		want string
	}{{nil, "from-a"}, {[]string{"--config", b}, "from-b"}} {
		fs := testFlags()
		if err := fs.Parse(c.args); err != nil {
			t.Fatal(err)
		}
		if err := Apply(fs, envOf(map[string]string{"NB_CONFIG": a})); err != nil {
			t.Fatal(err)
		}
		if got, _ := fs.GetString("listen"); got != c.want {
			t.Fatalf("%v: listen %q, want %q", c.args, got, c.want)
		}
	}
	fs := testFlags()
	err := Apply(fs, envOf(map[string]string{"NB_CONFIG": filepath.Join(t.TempDir(), "missing.yaml")}))
	if err == nil || !strings.Contains(err.Error(), "--config") {
		t.Fatalf("missing file: %v", err)
	}
}

// TestFileModes: a file others may write is refused; a file holding a
// secret must be private to this user or root.
func TestFileModes(t *testing.T) {
	const secret = "relay-secret: s3cr3t-value\n"
	// Someone other than the file's owner runs the server. As root (whose
	// files are always accepted) the file is handed to uid 4242.
	other := os.Geteuid() + 1
	if os.Geteuid() == 0 {
		other = 0
	}
	cases := []struct {
		name    string
		body    string
		mode    os.FileMode
		euid    int
		dirMode os.FileMode // of the file's directory; 0: as created
		wantErr string
	}{
		{name: "plain 0644", body: "listen: a\n", mode: 0o644, euid: os.Geteuid()},
		{name: "secret 0600", body: secret, mode: 0o600, euid: os.Geteuid()},
		{name: "secret 0400", body: secret, mode: 0o400, euid: os.Geteuid()},
		{name: "secret file path 0644", body: "relay-secret-file: /run/s\n", mode: 0o644, euid: os.Geteuid()},
		{name: "world-writable", body: "listen: a\n", mode: 0o646, euid: os.Geteuid(), wantErr: "writable by group or others (mode 0646)"},
		{name: "group-writable", body: "listen: a\n", mode: 0o664, euid: os.Geteuid(), wantErr: "writable by group or others"},
		{name: "secret group-readable", body: secret, mode: 0o640, euid: os.Geteuid(), wantErr: `holds the secret "relay-secret" but is readable by group or others (mode 0640)`},
		{name: "secret by name", body: "api-key: 1\n", mode: 0o604, euid: os.Geteuid(), wantErr: `holds the secret "api-key"`},
		{name: "marked secret", body: "pin: 1\n", mode: 0o640, euid: os.Geteuid(), wantErr: `holds the secret "pin"`},
		{name: "bool named like a secret", body: "oidc-use-id-token: true\n", mode: 0o644, euid: os.Geteuid()},
		{name: "secret of someone else", body: secret, mode: 0o600, euid: other, wantErr: `belongs to uid`},
		// Without a secret too: its owner can rewrite --agent-dir,
		// --acme-directory or --datadir.
		{name: "plain of someone else", body: "listen: a\n", mode: 0o644, euid: other, wantErr: `belongs to uid`},
		{name: "group-writable directory", body: "listen: a\n", mode: 0o644, euid: os.Geteuid(), dirMode: 0o775, wantErr: "directory"},
		{name: "sticky world-writable directory", body: "listen: a\n", mode: 0o644, euid: os.Geteuid(), dirMode: 0o777 | os.ModeSticky},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := writeConfig(t, c.body, c.mode)
			if c.dirMode != 0 {
				if err := os.Chmod(filepath.Dir(p), c.dirMode); err != nil {
					t.Fatal(err)
				}
			}
			if os.Geteuid() == 0 && strings.Contains(c.name, "someone else") {
				if err := os.Chown(p, 4242, 4242); err != nil {
					t.Fatal(err)
				}
			}
			fs := testFlags()
			err := applier{fs: fs, lookup: envOf(map[string]string{"NB_CONFIG": p}), euid: c.euid}.apply()
			if c.wantErr == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), c.wantErr) || !strings.Contains(err.Error(), p) {
				t.Fatalf("error %v, want %q naming %s", err, c.wantErr, p)
			}
			if strings.Contains(err.Error(), "s3cr3t") {
				t.Fatalf("error %q shows the secret", err)
			}
			if fs.Changed("listen") || fs.Changed("relay-secret") {
				t.Fatal("assigned despite the refusal")
			}
		})
	}
}

// TestInstall: the hook registers --config and fills the flags before the
// command's own PreRunE and RunE see them.
func TestInstall(t *testing.T) {
	var listen string
	var order []string
	cmd := &cobra.Command{
		Use:     "srv",
		PreRunE: func(*cobra.Command, []string) error { order = append(order, "pre:"+listen); return nil },
		RunE:    func(*cobra.Command, []string) error { order = append(order, "run:"+listen); return nil },
	}
	cmd.Flags().StringVar(&listen, "listen", ":1", "")
	httpListen := cmd.Flags().String("acme-http-listen", ":80", "")
	Install(cmd, envOf(map[string]string{"NB_LISTEN": "from-env", "NB_ACME_HTTP_LISTEN": ""}), EmptyEnv("acme-http-listen"))
	cmd.SetArgs(nil)
	if err := cmd.Execute(); err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff([]string{"pre:from-env", "run:from-env"}, order); d != "" {
		t.Fatalf("(-want +got)\n%s", d)
	}
	if *httpListen != "" {
		t.Fatalf("NB_ACME_HTTP_LISTEN= left %q", *httpListen)
	}

	bad := &cobra.Command{Use: "srv", RunE: func(*cobra.Command, []string) error { t.Fatal("ran despite a bad setting"); return nil }}
	bad.Flags().Int("port", 1, "")
	Install(bad, envOf(map[string]string{"NB_PORT": "x"}))
	bad.SetArgs(nil)
	bad.SilenceErrors, bad.SilenceUsage = true, true
	if err := bad.Execute(); err == nil || !strings.Contains(err.Error(), "NB_PORT") {
		t.Fatalf("bad env: %v", err)
	}
}

func TestEnvName(t *testing.T) {
	for in, want := range map[string]string{"acme-email": "NB_ACME_EMAIL", "listen": "NB_LISTEN", "turn-denied-peer-ip": "NB_TURN_DENIED_PEER_IP"} {
		if got := EnvName(in); got != want {
			t.Errorf("EnvName(%q) = %q, want %q", in, got, want)
		}
	}
}
